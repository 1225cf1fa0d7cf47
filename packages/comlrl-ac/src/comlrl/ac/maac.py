"""MAAC: multi-agent actor-critic with one centralized critic.

The critic reads the joint observation as text: ``[Agent i] <prompt_i>`` blocks (0-based)
separated by blank lines, and for a Q critic a ``[Joint Action]`` block followed by
``[Agent i action]`` blocks with each completion. It is tokenized with agent 0's tokenizer and
left-truncated to the critic's context (the value is read at the last token, which must stay).
The critic is updated once per joint sample; each actor is updated from its own samples with the
joint advantage (TD(0), or GAE(λ) with ``gae_lambda`` > 0). When the reward gives each agent its
own value, the critic is asked for each agent's own value (a ``[Value of Agent i]`` block ends the
joint text) and gets one joint sample per agent, so every actor's advantage is built from its own
reward and value.
"""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np

from comlrl.ac.base import ActorCriticTrainerBase
from comlrl.ac.config import MAACConfig
from comlrl.ac.critic_models import load_value_models, save_value_model
from comlrl.ac.critics import (
    check_critic_vocab,
    critic_devices,
    critic_head_dim,
    critic_model_config,
    resolve_critic_sources,
    seeded_init,
)
from comlrl.ac.metrics import actor_critic_stats
from comlrl.ac.ppo import actor_step
from comlrl.ac.samples import JointSample
from comlrl.ac.targets import (
    bootstrap_value,
    critic_rows,
    explained_variance,
    gae_tails,
    spread_values,
    td_target,
)
from comlrl.core.logprobs.values import estimate_values
from comlrl.core.models.backbone import backbone_of
from comlrl.core.rollout.record import ValueGroup
from comlrl.core.rollout.tree import TreeNode
from comlrl.core.training.dropout import dropout_off
from comlrl.core.training.optim import build_adamw
from comlrl.core.training.policy_update import UpdateLog, agent_rngs, mean_or_nan, minibatches
from comlrl.core.training.precision import master_weights
from comlrl.core.training.value_step import value_step


def joint_text(
    prompts: list[str], completions: list[str] | None = None, agent: int | None = None
) -> str:
    """The centralized critic's input: every agent's prompt, and (Q) the joint action. With
    per-agent rewards the critic estimates each agent's own value: ``agent`` appends a
    ``[Value of Agent i]`` block naming whose value is asked for."""
    blocks = [f"[Agent {i}] {p}" for i, p in enumerate(prompts)]
    if completions is not None:
        blocks.append("[Joint Action]")
        blocks.extend(f"[Agent {i} action]\n{c}" for i, c in enumerate(completions))
    if agent is not None:
        blocks.append(f"[Value of Agent {agent}]")
    return "\n\n".join(blocks)


class MAACTrainer(ActorCriticTrainerBase):
    """Multi-agent actor-critic trainer with a centralized critic (CoMLRL-compatible).

    Attributes: ``agents``, ``critics`` (one), ``agent_optimizers``, ``critic_optimizers``
    (one), ``tokenizers``.
    """

    algorithm_name = "MAAC"
    default_config_cls = MAACConfig
    joint_sample_cls = JointSample

    # ------------------------------------------------------------------ construction
    def _resolve_critic_sources(self, critic_model, critics, num_agents: int, args) -> list:
        if critic_model is None and critics is None:
            raise ValueError(
                "MAAC needs one centralized critic: critics must be provided, as critic_model or "
                "a one-element critics list."
            )
        return resolve_critic_sources(critic_model, critics, 1, "MAAC")

    def _setup_critics(self, sources: list) -> None:
        a = self.args
        with seeded_init(self.args.seed, salt=1):
            critic = load_value_models(
                sources,
                hidden_dim=critic_head_dim(self.args, self.model_config),
                model_config=critic_model_config(self.model_config),
            )[0]
        if any(critic.backbone is backbone_of(agent) for agent in self.agents):
            raise ValueError(
                "MAAC's critic is one of the agents' own models; pass a separate critic model."
            )
        if a.bf16:
            master_weights(critic)
        critic.to(critic_devices(self.args, self.agent_devices, 1)[0])
        check_critic_vocab(
            critic.backbone, self.tokenizers[0], "the centralized critic", self.model_config
        )
        self.critics = [critic]
        self.critic_optimizers = [
            build_adamw(critic.parameters(), lr=a.critic_learning_rate, weight_decay=a.weight_decay)
        ]
        config = critic.config
        limit = getattr(config, "max_position_embeddings", None) or getattr(
            config, "n_positions", None
        )
        self._critic_max_tokens = int(limit) if isinstance(limit, int) and limit > 0 else None

    @property
    def critic(self):
        """The centralized critic."""
        return self.critics[0]

    # ------------------------------------------------------------------ the joint observation
    def joint_ids(
        self, prompts: list[str], completions: list[str] | None = None, agent: int | None = None
    ) -> list[int]:
        """Token ids of :func:`joint_text`, keeping the tail when longer than the critic's
        context."""
        text = joint_text(prompts, completions, agent)
        ids = self.tokenizers[0](text, add_special_tokens=True)["input_ids"]
        if self._critic_max_tokens is not None and len(ids) > self._critic_max_tokens:
            ids = ids[-self._critic_max_tokens :]
        return list(ids)

    def values_of(self, rows: list[list[int]]) -> list[float]:
        """The critic's estimates at the last token of each joint row (no gradients)."""
        critic = self.critic
        pad = self.tokenizers[0].pad_token_id
        return estimate_values(
            critic.backbone, critic.value_head, rows, pad, self.args.logprob_max_tokens, self.args
        )

    def _estimate_values(self, nodes: list[TreeNode]):
        """Joint values ``[agent][node][action]`` and the critic's ids ``[agent][node][action]``.
        Shared rewards: one joint value for every agent (one ids table). Per-agent rewards:
        each agent's own value, asked for with the agent named in the joint text."""
        if not any(node.per_agent for node in nodes):
            values, ids = self._joint_values(nodes, None)
            return [values] * self.num_agents, [ids]
        tables = [self._joint_values(nodes, i) for i in range(self.num_agents)]
        return [t[0] for t in tables], [t[1] for t in tables]

    def _joint_values(self, nodes: list[TreeNode], agent: int | None):
        q = self.args.uses_q_critic
        ids_per_node: list[list[list[int]]] = []
        rows: list[list[int]] = []
        for node in nodes:
            if q:
                per_action = [
                    self.joint_ids(node.prompts, node.completions(k), agent)
                    for k in range(len(node.joint_actions))
                ]
                rows.extend(per_action)
            else:
                # V(s) is one estimate per joint state, shared by every action at the node.
                state = self.joint_ids(node.prompts, None, agent)
                rows.append(state)
                per_action = [state] * len(node.joint_actions)
            ids_per_node.append(per_action)
        flat = self.values_of(rows)
        values = spread_values(flat, [len(node.joint_actions) for node in nodes], bool(q))
        return values, ids_per_node

    def _joint_samples(self, nodes, index, per_agent, values, aux) -> list[list[JointSample]]:
        """The critic's target uses the joint reward, shaped by the agents' mean reference KL
        (each actor's own advantage is shaped by its own KL); with ``gae_lambda`` > 0 it is the
        λ-return of those joint rewards. With per-agent rewards there is one joint sample per
        agent and action (agent-minor order): its own value, target and shaped reward."""
        gamma = self.args.discount
        coef = self.args.reference_kl_coef
        q = self.args.uses_q_critic
        out = []
        for j, node in enumerate(nodes):
            per_node = []
            for k in range(len(node.joint_actions)):
                child = self._child(node, k)
                for a, ids in enumerate(aux):
                    if len(aux) > 1:
                        reward = per_agent[a][j].rewards[k]
                    else:
                        reward = float(node.rewards[k])
                        groups = [per_agent[i][j] for i in range(self.num_agents)]
                        if all(g.kls for g in groups):
                            reward -= coef * float(np.mean([g.kls[k] for g in groups]))
                    next_value = None
                    if child is not None:
                        next_value = bootstrap_value(values[a][index[id(child)]], q)
                    per_node.append(
                        JointSample(
                            turn_idx=node.turn,
                            input_ids=list(ids[j][k]),
                            old_value=float(values[a][j][k]),
                            target=td_target(reward, next_value, gamma),
                            step=node.step,
                        )
                    )
            out.append(per_node)
        if self.args.gae_lambda > 0.0:
            children = self.tree_children(nodes, index)
            width = len(aux)
            for a in range(width):
                # each agent's samples (every width-th, from a) form their own λ-return
                deltas = [[s.target - s.old_value for s in per_node[a::width]] for per_node in out]
                tails = gae_tails(deltas, children, gamma, self.args.gae_lambda)
                for per_node, per_node_tails in zip(out, tails):
                    for s, tail in zip(per_node[a::width], per_node_tails):
                        s.target += tail
        return out

    @property
    def critic_buffer(self) -> list[JointSample]:
        """The centralized critic's joint samples awaiting an update."""
        return self.rollout_buffer.joint

    # ------------------------------------------------------------------ updates
    def _update(self, buffers: list[list[ValueGroup]], joint: list) -> dict[str, float]:
        """The actors from their groups (concurrently across devices in ``mp`` mode), then the
        centralized critic's passes over the joint samples."""
        work = list(zip(buffers, agent_rngs(self.shuffle_rng, self.num_agents)))
        stats = self.workers.map(self._update_actor, work)
        # Drawn after the actors' seeds, from the same generator.
        critic_rng = random.Random(self.shuffle_rng.getrandbits(64))
        # The critic makes as many passes as the actors, towards the targets of the rollout.
        passes = [self._update_critic(joint, critic_rng) for _ in range(self.args.num_iterations)]
        metrics: dict[str, float] = {}
        for i, st in enumerate(stats):
            named = actor_critic_stats(st, critic=False)
            metrics.update({f"agent_{i}/{k}": v for k, v in named.items()})
        metrics["critic/critic_loss"] = mean_or_nan(passes)
        metrics["critic/value_mean"] = float(np.mean([s.old_value for s in joint]))
        metrics["critic/explained_variance"] = explained_variance(
            [s.old_value for s in joint], [s.target for s in joint]
        )
        return metrics

    def _update_actor(self, agent: int, work) -> dict[str, float]:
        """``num_iterations`` passes of row mini-batches (advantages z-scored per turn), the
        actor's step on each (:func:`comlrl.ac.ppo.actor_rows`)."""
        groups, rng = work
        log, model = UpdateLog(), self.agents[agent]
        model.train()
        with dropout_off(model):  # the policy that sampled, so a first pass's ratio is 1
            for batch in minibatches(list(groups), self.args, rng, unit="row", sync=self.sync):
                log.step(actor_step(self, agent, batch))
        return log.means()

    def _update_critic(self, joint: list[JointSample], rng: random.Random) -> float:
        """One pass, once per joint sample: shuffled mini-batches of ``train_batch_size``, each
        a step of core's :func:`~comlrl.core.training.value_step.value_step`."""
        critic = self.critic
        critic.train()
        order = list(joint)
        rng.shuffle(order)
        size = self.args.train_batch_size
        pad = self.tokenizers[0].pad_token_id
        errors = []
        for start in range(0, len(order), size):
            batch = order[start : start + size]
            err = value_step(
                self,
                critic_rows(
                    self.args,
                    critic,
                    self.critic_optimizers[0],
                    [s.input_ids for s in batch],
                    [s.target for s in batch],
                    [s.old_value for s in batch],
                    pad,
                    "centralized critic",
                ),
            )
            if err is not None:
                errors.append(err)
        return mean_or_nan(errors)

    # ------------------------------------------------------------------ saving and state
    def save_model(self, output_dir: str) -> None:
        """Write ``output_dir/agent_{i}/`` (actor and tokenizer) and ``output_dir/critic/``
        (the critic's body, ``value_head.pt`` and agent 0's tokenizer, which it reads with)."""
        for i, (model, tok) in enumerate(zip(self.agents, self.tokenizers)):
            path = os.path.join(output_dir, f"agent_{i}")
            model.save_pretrained(path)
            tok.save_pretrained(path)
        critic_dir = os.path.join(output_dir, "critic")
        save_value_model(self.critic, critic_dir)
        self.tokenizers[0].save_pretrained(critic_dir)
        self.reporting.note_saved_model(output_dir)

    def checkpoint_tokenizers(self) -> dict[str, Any]:
        """Each actor's tokenizer, and agent 0's with the critic (it reads the joint text)."""
        toks = super().checkpoint_tokenizers()
        toks["critic"] = self.tokenizers[0]
        return toks

    def trainable_models(self) -> dict[str, Any]:
        """Actors (``agent_i``) and the centralized ``critic``."""
        models: dict[str, Any] = {f"agent_{i}": m for i, m in enumerate(self.agents)}
        models["critic"] = self.critic
        return models
