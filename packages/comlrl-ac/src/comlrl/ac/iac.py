"""IAC: independent actor-critic. Each agent learns from its own critic, either a separate model
(a transformer body plus a value head) or a value head on its actor's last hidden state."""

from __future__ import annotations

import os
from typing import Any

import torch

from comlrl.ac.base import ActorCriticTrainerBase
from comlrl.ac.config import IACConfig
from comlrl.ac.critic_models import (
    build_value_head,
    load_value_head_state,
    load_value_models,
    save_value_head,
    save_value_model,
)
from comlrl.ac.critics import (
    check_critic_vocab,
    check_head_devices,
    critic_devices,
    critic_head_dim,
    critic_model_config,
    resolve_critic_sources,
    seeded_init,
)
from comlrl.ac.metrics import actor_critic_stats
from comlrl.ac.ppo import Row, actor_loss, actor_step, advantage_divisors
from comlrl.ac.targets import critic_rows, spread_values, value_error
from comlrl.core.logprobs import micro_batches_for
from comlrl.core.logprobs.values import estimate_values, logprobs_and_values
from comlrl.core.models.backbone import backbone_of
from comlrl.core.rollout.record import ValueGroup
from comlrl.core.rollout.tree import TreeNode
from comlrl.core.training.dropout import dropout_off
from comlrl.core.training.optim import build_adamw
from comlrl.core.training.policy_update import UpdateLog, agent_rngs, minibatches
from comlrl.core.training.precision import master_weights
from comlrl.core.training.train_step import Target, train_step
from comlrl.core.training.value_step import value_step


class IACTrainer(ActorCriticTrainerBase):
    """Independent actor-critic trainer (CoMLRL-compatible constructor and methods).

    Attributes: ``agents``, ``critics`` (empty with value heads), ``value_heads`` (empty with
    separate critics), ``agent_optimizers``, ``critic_optimizers``, ``tokenizers``.
    """

    algorithm_name = "IAC"
    default_config_cls = IACConfig

    def fsdp_unsupported_reason(self, args) -> str | None:
        """Value heads on the actors' own bodies would share the sharded parameters."""
        if not getattr(args, "use_separate_critic", True):
            return "use_separate_critic=False puts value heads on the sharded actors' bodies"
        return super().fsdp_unsupported_reason(args)

    # ------------------------------------------------------------------ construction
    def _resolve_critic_sources(self, critic_model, critics, num_agents: int, args) -> list:
        if not args.use_separate_critic:
            if critic_model is not None or critics is not None:
                raise ValueError(
                    "use_separate_critic=False puts a value head on each actor, so critic_model "
                    "and critics must not be given; drop them or set use_separate_critic=True."
                )
            return []
        if critic_model is None and critics is None:
            raise ValueError(
                "IAC with use_separate_critic=True: critics must be provided, as critic_model "
                "(one copy per agent) or critics (one per agent); or set "
                "use_separate_critic=False for value heads on the actors."
            )
        return resolve_critic_sources(critic_model, critics, num_agents, "IAC")

    @property
    def separate_critics(self) -> bool:
        """True when every agent has a separate critic model."""
        return self.args.use_separate_critic

    def _setup_critics(self, sources: list) -> None:
        a = self.args
        self.value_heads: list = []
        if not a.use_separate_critic:
            self._setup_value_heads()
            return
        with seeded_init(self.args.seed, salt=1):
            self.critics = load_value_models(
                sources,
                hidden_dim=critic_head_dim(self.args, self.model_config),
                model_config=critic_model_config(self.model_config),
            )
        for i, (agent, critic) in enumerate(zip(self.agents, self.critics)):
            if critic.backbone is backbone_of(agent):
                raise ValueError(
                    f"critic {i} is agent {i}'s own model; pass a separate critic model, or set "
                    "use_separate_critic=False for a value head on the actor."
                )
        for i, (critic, device) in enumerate(
            zip(self.critics, critic_devices(self.args, self.agent_devices, self.num_agents))
        ):
            if a.bf16:
                master_weights(critic)
            critic.to(device)
            check_critic_vocab(
                critic.backbone, self.tokenizers[i], f"critic {i}", self.model_config
            )
        self.critic_optimizers = [
            build_adamw(c.parameters(), lr=a.critic_learning_rate, weight_decay=a.weight_decay)
            for c in self.critics
        ]

    def _setup_value_heads(self) -> None:
        """One head per agent on its actor's last hidden state; an actor directory saved by
        :meth:`save_model` restores its head. The head trains with the actor's optimizer, at
        ``critic_learning_rate``."""
        a = self.args
        check_head_devices(self.args, self.agent_devices)
        for i, (agent, src) in enumerate(zip(self.agents, self.sources)):
            saved = None
            if isinstance(src, (str, os.PathLike)) and os.path.isdir(os.fspath(src)):
                saved = load_value_head_state(src)
            with seeded_init(self.args.seed, salt=100 + i):
                head = build_value_head(
                    backbone_of(agent), a.value_head_hidden_dim, saved, f"agent {i}'s value head"
                )
            self.value_heads.append(head.to(self.agent_devices[i]))
        self.agent_optimizers = [
            build_adamw(
                [
                    {"params": list(agent.parameters()), "lr": a.agent_learning_rate},
                    {"params": list(head.parameters()), "lr": a.critic_learning_rate},
                ],
                lr=a.agent_learning_rate,
                weight_decay=a.weight_decay,
            )
            for agent, head in zip(self.agents, self.value_heads)
        ]

    # ------------------------------------------------------------------ values
    def _value_modules(self, agent: int):
        if self.separate_critics:
            critic = self.critics[agent]
            return critic.backbone, critic.value_head
        return backbone_of(self.agents[agent]), self.value_heads[agent]

    def _value_row(self, row: Row) -> list[int]:
        """What the critic reads: the history (V) or history plus action (Q)."""
        g, k = row
        if self.args.uses_q_critic:
            return list(g.prompt_ids) + list(g.completion_ids[k])
        return list(g.prompt_ids)

    def values_of(self, agent: int, rows: list[list[int]]) -> list[float]:
        """Agent ``agent``'s critic estimates at the last token of each row (no gradients)."""
        backbone, head = self._value_modules(agent)
        pad = self.tokenizers[agent].pad_token_id
        return estimate_values(backbone, head, rows, pad, self.args.logprob_max_tokens, self.args)

    def _estimate_values(self, nodes: list[TreeNode]):
        q = bool(self.args.uses_q_critic)
        rows: list[list[list[int]]] = []
        for i in range(self.num_agents):
            if q:
                rows.append(
                    [
                        list(node.samples[i].prompt_ids)
                        + list(node.samples[i].completion_ids[action[i]])
                        for node in nodes
                        for action in node.joint_actions
                    ]
                )
            else:
                # V(h) does not depend on the action: one row per prompt, not per sample.
                rows.append([list(node.samples[i].prompt_ids) for node in nodes])
        counts = [len(node.joint_actions) for node in nodes]
        # each agent on its worker (at once in ``mp`` mode, the critics on the agents' devices)
        flat = self.workers.map(lambda i, agent_rows: self.values_of(i, list(agent_rows)), rows)
        return [spread_values(values, counts, q) for values in flat], None

    # ------------------------------------------------------------------ updates
    def _update(self, buffers: list[list[ValueGroup]], joint: list) -> dict[str, float]:
        """Every agent's actor and critic from its groups (concurrently across devices in
        ``mp`` mode)."""
        for agent in range(self.num_agents):
            for module in self._value_modules(agent):
                module.train()
        work = list(zip(buffers, agent_rngs(self.shuffle_rng, self.num_agents)))
        metrics: dict[str, float] = {}
        for i, st in enumerate(self.workers.map(self._update_agent, work)):
            metrics.update({f"agent_{i}/{k}": v for k, v in actor_critic_stats(st).items()})
        return metrics

    def _update_agent(self, agent: int, work) -> dict[str, float]:
        """``num_iterations`` passes of row mini-batches (advantages z-scored per turn): the
        actor's step on :func:`comlrl.ac.ppo.actor_rows`, then its critic's regression on the
        same rows; with a value head, one step on both losses."""
        groups, rng = work
        log, model = UpdateLog(), self.agents[agent]
        model.train()
        with dropout_off(model):  # the policy that sampled, so a first pass's ratio is 1
            for batch in minibatches(list(groups), self.args, rng, unit="row", sync=self.sync):
                if not self.separate_critics:
                    log.step(self._shared_step(agent, batch))
                    continue
                log.step(actor_step(self, agent, batch))
                log.value("critic_loss", value_step(self, self._critic_rows(agent, batch)))
        return log.means()

    def _critic_rows(self, agent: int, batch: tuple[list[Row], list[float]]):
        """Agent ``agent``'s critic regression on the rows of the actor's mini-batch."""
        rows, _ = batch
        return critic_rows(
            self.args,
            self.critics[agent],
            self.critic_optimizers[agent],
            [self._value_row(row) for row in rows],
            [g.targets[k] for g, k in rows],
            [g.values[k] for g, k in rows],
            self.tokenizers[agent].pad_token_id,
            f"agent {agent}",
        )

    def _shared_step(self, agent: int, minibatch: tuple[list[Row], list[float]]):
        """One step on ``L_π + value_loss_coef · L_V`` where log-probs and values come from the
        same forward of the actor; returns the actor's loss, the gradient norm and the
        critic's loss with the ratio's metrics (core's step result)."""
        batch, advs = minibatch
        a = self.args
        model, head = self.agents[agent], self.value_heads[agent]
        opt = self.agent_optimizers[agent]
        pad = self.tokenizers[agent].pad_token_id
        value_at = "sequence_end" if a.uses_q_critic else "prompt_end"
        lengths = [len(g.prompt_ids) + len(g.completion_ids[k]) for g, k in batch]
        size = len(batch)
        divisors = advantage_divisors(self, batch)

        def part_loss(idx):
            lp, values = logprobs_and_values(
                model,
                head,
                [batch[j][0].prompt_ids for j in idx],
                [batch[j][0].completion_ids[batch[j][1]] for j in idx],
                pad,
                value_at,
                temperature=a.temperature,
            )
            device = values.device
            w = torch.tensor(
                [advs[j] / divisors[j] for j in idx], dtype=torch.float32, device=device
            )
            rows = [batch[j] for j in idx]
            t = torch.tensor([g.targets[k] for g, k in rows], dtype=values.dtype, device=device)
            o = torch.tensor([g.values[k] for g, k in rows], dtype=values.dtype, device=device)
            policy_loss, metrics = actor_loss(a, lp, w, rows)
            err = value_error(values, t, o, a.value_clip_range)
            loss = policy_loss + a.value_loss_coef * err.sum() / size
            parts = {"actor_sum": policy_loss.item(), "error_sum": err.detach().sum().item()}
            return loss, {**metrics, **parts}

        with dropout_off(model):  # as the rollout sampled (see comlrl.core.training.dropout)
            step = train_step(
                self,
                Target(
                    list(model.parameters()) + list(head.parameters()),
                    opt,
                    agent,
                    turn=batch[0][0].turn,  # one turn's rows (the monitors' per-turn view)
                ),
                micro_batches_for(model, lengths, a.logprob_max_tokens),
                part_loss,
                what=f"{self.algorithm_name} actor+value (agent {agent}) loss",
            )
        if step is None:
            return None
        ratio = {k: v for k, v in step.means().items() if k not in ("actor_sum", "error_sum")}
        critic_loss = step.total("error_sum") / size
        return step.total("actor_sum"), step.grad_norm, {"critic_loss": critic_loss, **ratio}

    # ------------------------------------------------------------------ saving and state
    def save_model(self, output_dir: str) -> None:
        """Write each actor (and its tokenizer) with its critic in ``critic/`` or its head as
        ``value_head.pt``: ``output_dir/agent_{i}/`` for several agents, ``output_dir/`` for one.
        Both reload as trainer inputs (``agents=[...]``, ``critics=[.../critic]``)."""
        for i, (model, tok) in enumerate(zip(self.agents, self.tokenizers)):
            path = output_dir if self.num_agents == 1 else os.path.join(output_dir, f"agent_{i}")
            model.save_pretrained(path)
            tok.save_pretrained(path)
            if self.separate_critics:
                critic_dir = os.path.join(path, "critic")
                save_value_model(self.critics[i], critic_dir)
                tok.save_pretrained(critic_dir)
            else:
                save_value_head(self.value_heads[i], path)
        self.reporting.note_saved_model(output_dir)

    def checkpoint_tokenizers(self) -> dict[str, Any]:
        """Each agent's tokenizer, saved with its actor and with its critic (which reads it)."""
        toks = super().checkpoint_tokenizers()
        if self.separate_critics:
            toks.update({f"critic_{i}": tok for i, tok in enumerate(self.tokenizers)})
        return toks

    def trainable_models(self) -> dict[str, Any]:
        """Actors, then each agent's critic (``critic_i``) or value head (``value_head_i``)."""
        models: dict[str, Any] = {f"agent_{i}": m for i, m in enumerate(self.agents)}
        if self.separate_critics:
            models.update({f"critic_{i}": c for i, c in enumerate(self.critics)})
        else:
            models.update({f"value_head_{i}": h for i, h in enumerate(self.value_heads)})
        return models
