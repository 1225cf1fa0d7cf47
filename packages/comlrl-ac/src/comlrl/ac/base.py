"""What IAC and MAAC share: construction order, episode collection (rollout → KL shaping →
rollout log-probs for the ratio loss → old values → TD targets → GAE(λ)), per-agent buffers
and resumable state. The optimisation steps live in :mod:`comlrl.ac.steps` (the actor's loss in
:mod:`comlrl.ac.ppo`), metrics and evaluation in :mod:`comlrl.ac.reporting`, critic placement
in :mod:`comlrl.ac.critics`.

A family fills in the critic: how it is built and placed (``_resolve_critic_sources``,
``_setup_critics``), what it estimates at rollout (``_estimate_values``), how a drained buffer
updates the models (``_update``), and what is saved.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from comlrl.ac.config import ActorCriticConfig
from comlrl.ac.ppo import attach_old_logps
from comlrl.ac.reporting import RUN_CONFIG_KEYS, drain_metrics, episode_metrics, evaluation_metrics
from comlrl.ac.samples import ActorCriticInputs, Episode, JointSample, RolloutSample
from comlrl.ac.targets import bootstrap_value, gae_tails, q_advantages, td_target
from comlrl.ac.values import ValueModel
from comlrl.core.buffer import Batch, Experience, Record
from comlrl.core.inputs import compat_constructor, signature_of
from comlrl.core.logging.completions import sample_rows
from comlrl.core.logprobs import micro_batches
from comlrl.core.logprobs.budget import token_budget
from comlrl.core.models import resolve_model_sources
from comlrl.core.optim import build_adamw
from comlrl.core.reference import estimator_for, reference_models_for, sequence_kl
from comlrl.core.rollout.tree import TreeNode
from comlrl.core.trainer import TrainerBase


class ActorCriticTrainerBase(TrainerBase):
    """Shared machinery of the actor-critic trainers (compat name of CoMLRL's mix-in). The
    critics' placement, the optimisation steps and the metrics are functions of
    :mod:`comlrl.ac.critics`, :mod:`comlrl.ac.steps` and :mod:`comlrl.ac.reporting`."""

    run_config_keys = RUN_CONFIG_KEYS

    algorithm_name = "ActorCritic"
    default_config_cls: type[ActorCriticConfig] = ActorCriticConfig
    # The critics' value estimates at rollout are reported apart from generation and updates.
    timing_phases = ("generate", "reward", "values", "update")

    inputs_cls = ActorCriticInputs
    __init__ = compat_constructor(
        signature_of(
            (
                "agent_model",
                "critic_model",
                "tokenizer",
                "reward_func",
                "reward_processor",
                "formatters",
                "args",
                "train_dataset",
                "eval_dataset",
                "model_config",
                "wandb_config",
                "metrics_callback",
                "external_transition",
                "agents",
                "critics",
            ),
            keyword_only=("num_agents",),
        ),
        ActorCriticInputs,
    )

    def setup(self, inputs: ActorCriticInputs) -> None:
        """Arguments as in CoMLRL 1.4.3. ``num_agents`` (ours, keyword-only) sets how many
        agents ``agent_model`` builds when ``args.num_agents`` is unset (default 2)."""
        args = inputs.args if inputs.args is not None else self.default_config_cls()
        if not isinstance(args, self.default_config_cls):
            raise ValueError(
                f"args must be a {self.default_config_cls.__name__}, got {type(args).__name__}."
            )
        # Cheap checks first, in the reference's order, so no model loads for a doomed run.
        if inputs.reward_func is None or not callable(inputs.reward_func):
            raise ValueError("reward_func must be a callable.")
        if inputs.agent_model is None and inputs.agents is None:
            raise ValueError("Either agent_model or agents must be provided.")
        callback = inputs.metrics_callback
        if callback is not None and not callable(callback):
            raise ValueError(f"metrics_callback must be callable or None, got {callback!r}.")
        num_agents = inputs.num_agents
        if inputs.agents is None:
            if num_agents is not None and args.num_agents not in (None, num_agents):
                raise ValueError(
                    f"num_agents ({num_agents}) and args.num_agents ({args.num_agents}) differ; "
                    "set one of them."
                )
            num_agents = args.num_agents or num_agents or 2
        count = len(resolve_model_sources(inputs.agent_model, inputs.agents, num_agents))
        critic_sources = self._resolve_critic_sources(
            inputs.critic_model, inputs.critics, count, args
        )
        super().setup(
            inputs.replace(args=args, num_agents=num_agents, eval_logger=None, eval_aggregator=None)
        )
        self.metrics_callback = callback
        a = self.args
        self.agent_optimizers = [
            build_adamw(m.parameters(), lr=a.agent_learning_rate, weight_decay=a.weight_decay)
            for m in self.agents
        ]
        self.critics: list[ValueModel] = []
        self.critic_optimizers: list[torch.optim.Optimizer] = []
        self._setup_critics(critic_sources)
        self.reference_models = reference_models_for(self)
        self.use_buffer(a.rollout_buffer_size, RolloutSample, self.joint_sample_cls)

    # ------------------------------------------------------------------ family hooks
    def _resolve_critic_sources(self, critic_model, critics, num_agents: int, args) -> list:
        """Validate the critic arguments (no loading) and return one source per critic."""
        raise NotImplementedError

    def _setup_critics(self, sources: list) -> None:
        """Load and place the critics (or value heads) and build their optimizers."""
        raise NotImplementedError

    def _estimate_values(self, nodes: list[TreeNode]) -> tuple[list, Any]:
        """Old values ``[agent][node][action]`` under no_grad, plus family data for
        :meth:`_joint_samples`."""
        raise NotImplementedError

    def _joint_samples(self, nodes, index, samples, values, aux) -> list[list[JointSample]]:
        """Per node, the joint samples of a centralized critic (none by default)."""
        return [[] for _ in nodes]

    def _update(self, buffers: list[list[RolloutSample]], joint: list) -> dict[str, float]:
        """Update actors and critics from a full buffer; return metrics to log."""
        raise NotImplementedError

    def items_per_batch(self) -> int:
        """Items rolled out together: enough to fill one buffer (``rollout_batch_size``
        overrides)."""
        a = self.args
        if a.rollout_batch_size:
            return a.rollout_batch_size
        per_item = a.num_generations * a.num_turns
        return max(1, math.ceil(a.rollout_buffer_size / per_item))

    # ------------------------------------------------------------------ collect / update
    def collect(self, unit) -> Batch:
        """Roll out the unit's items; one record per item (episode), with its samples' old
        values, TD targets and advantages, and the ``metrics_callback`` metrics."""
        roots, _ = self.rollouts.unit_trees(unit)
        episodes = self._collect(roots)
        self.reporting.offer_completions(
            lambda: [r for e in episodes for r in sample_rows(e.samples)]
        )
        return Batch(
            [
                Record(
                    e.samples,
                    e.env_step,
                    joint=e.joint,
                    metrics=episode_metrics(self.metrics_callback, e),
                )
                for e in episodes
            ]
        )

    def eval_metrics(self, items: list[dict]) -> dict[str, float]:
        """The core's light eval plus ``metrics_callback``'s ``eval/{k}`` (see
        :func:`comlrl.ac.reporting.evaluation_metrics`)."""
        return evaluation_metrics(self, items)

    def update(self, experience: Experience) -> dict[str, float]:
        """Update actors and critics from a full buffer; returns the training metrics."""
        stats = self._update(experience.samples, experience.joint)
        return drain_metrics(self.args, experience.samples, stats)

    def _make_sample(self, agent: int, node: TreeNode, action: int) -> RolloutSample:
        k = node.joint_actions[action][agent]
        ps = node.samples[agent]
        metadata = {"turn_idx": node.turn, "generation_idx": k, "batch_item": node.item}
        if node.per_agent:
            # the joint action's shared (mean) reward, for the logged turn reward_mean
            metadata["joint_reward"] = float(node.rewards[action])
        return RolloutSample(
            agent_idx=agent,
            prompt=node.prompts[agent],
            completion=ps.texts[k],
            prompt_ids=list(ps.prompt_ids),
            completion_ids=list(ps.completion_ids[k]),
            reward=float(node.reward_of(action, agent)),
            returns=0.0,
            advantage=None,
            old_value=None,
            value_target=None,
            turn_idx=node.turn,
            generation_idx=k,
            env_step=node.env_step,
            metadata=metadata,
        )

    def _tree_samples(
        self, nodes: list[TreeNode], with_kl: bool = True
    ) -> list[list[list[RolloutSample]]]:
        """``[agent][node][action]`` samples with reward-to-go filled in (no critic fields);
        ``with_kl`` shapes rewards with the reference KL when it is enabled."""
        index = {id(n): j for j, n in enumerate(nodes)}
        samples = [
            [[self._make_sample(i, n, k) for k in range(len(n.joint_actions))] for n in nodes]
            for i in range(self.num_agents)
        ]
        if self.reference_models and with_kl:
            self._attach_reference_kl(samples)
        # Undiscounted, as 1.4.3 and evaluation report expected_return; the TD targets discount.
        for i in range(self.num_agents):
            for j in range(len(nodes) - 1, -1, -1):
                for k, s in enumerate(samples[i][j]):
                    child = self._child(nodes[j], k)
                    later = 0.0
                    if child is not None:
                        later = float(np.mean([c.returns for c in samples[i][index[id(child)]]]))
                    s.returns = s.shaped_reward + later
        return samples

    @staticmethod
    def _child(node: TreeNode, action: int) -> TreeNode | None:
        return node.children[action] if node.children else None

    def _collect(self, roots: list[TreeNode]) -> list[Episode]:
        """Samples with old values, TD targets and advantages, grouped by item."""
        nodes = [node for root in roots for node in root.walk()]
        index = {id(n): j for j, n in enumerate(nodes)}
        samples = self._tree_samples(nodes)
        attach_old_logps(self, samples)
        with self.timed("values"):
            values, aux = self._estimate_values(nodes)
        gamma = self.args.discount
        q = self.args.uses_q_critic
        for i in range(self.num_agents):
            for j, node in enumerate(nodes):
                for k, s in enumerate(samples[i][j]):
                    child = self._child(node, k)
                    next_value = None
                    if child is not None:
                        next_value = bootstrap_value(values[i][index[id(child)]], q)
                    s.old_value = float(values[i][j][k])
                    s.value_target = td_target(s.shaped_reward, next_value, gamma)
                    s.advantage = s.value_target - s.old_value
                    s.metadata["value_target"] = s.value_target
        if self.args.gae_lambda > 0.0:
            self._apply_gae(nodes, index, samples)
        if q:
            # Q - V: the TD error against Q(h, a) itself carries no signal (see ac.targets).
            for i in range(self.num_agents):
                for j in range(len(nodes)):
                    for s, adv in zip(samples[i][j], q_advantages(values[i][j])):
                        s.advantage = adv
        joint = self._joint_samples(nodes, index, samples, values, aux)
        episodes = []
        for root in roots:
            ids = [index[id(n)] for n in root.walk()]
            episodes.append(
                Episode(
                    samples=[
                        [s for j in ids for s in samples[i][j]] for i in range(self.num_agents)
                    ],
                    joint=[js for j in ids for js in joint[j]],
                    env_step=max(nodes[j].env_step for j in ids),
                )
            )
        return episodes

    def tree_children(self, nodes: list[TreeNode], index: dict) -> list[list[int | None]]:
        """Per node and joint action, the index of the node it leads to (None at an end)."""
        return [
            [
                None if (child := self._child(n, k)) is None else index[id(child)]
                for k in range(len(n.joint_actions))
            ]
            for n in nodes
        ]

    def _apply_gae(self, nodes: list[TreeNode], index: dict, samples) -> None:
        """Turn each agent's TD(0) advantages into GAE(λ) along its trajectory and its targets
        into λ-returns (both get the same tail; see :func:`~comlrl.ac.targets.gae_tails`)."""
        children = self.tree_children(nodes, index)
        gamma, lam = self.args.discount, self.args.gae_lambda
        for per_agent in samples:
            deltas = [[s.advantage for s in per_node] for per_node in per_agent]
            for per_node, tails in zip(per_agent, gae_tails(deltas, children, gamma, lam)):
                for s, tail in zip(per_node, tails):
                    s.advantage += tail
                    s.value_target += tail
                    s.metadata["value_target"] = s.value_target

    def _attach_reference_kl(self, samples: list[list[list[RolloutSample]]]) -> None:
        """KL to the frozen reference per sample, subtracted from the reward (shaping only)."""
        coef = self.args.reference_kl_coef

        def run(i: int, _arg) -> list[float]:
            flat = [s for per_node in samples[i] for s in per_node]
            lengths = [len(s.prompt_ids) + len(s.completion_ids) for s in flat]
            kls = [0.0] * len(flat)
            pad = self.tokenizers[i].pad_token_id
            budget = token_budget(self.args.logprob_max_tokens, self.agents[i])
            for idx in micro_batches(lengths, budget):
                part = sequence_kl(
                    self.agents[i],
                    self.reference_models[i],
                    [flat[j].prompt_ids for j in idx],
                    [flat[j].completion_ids for j in idx],
                    pad,
                    estimator=estimator_for(self.args, "reward"),
                    temperature=self.args.temperature,
                )
                for j, kl in zip(idx, part):
                    kls[j] = float(kl)
            return kls

        results = self.workers.map(run)
        for i, kls in enumerate(results):
            flat = [s for per_node in samples[i] for s in per_node]
            for s, kl in zip(flat, kls):
                s.reference_kl = kl
                s.metadata.update(
                    reference_kl=kl,
                    reference_kl_penalty=coef * kl,
                    environment_reward=s.reward,
                    shaped_reward=s.reward - coef * kl,
                )

    # ------------------------------------------------------------------ resumable state
    def optimizers_list(self) -> list:
        """Actor optimizers, then critic (or value-head) optimizers."""
        return list(self.agent_optimizers) + list(self.critic_optimizers)

    @property
    def optimizers(self) -> list:
        """The actors' optimizers (the MAGRPO-family attribute name)."""
        return self.agent_optimizers
