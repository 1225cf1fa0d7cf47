"""What IAC and MAAC share: construction order, episode collection on core's rollout record
(rollout → KL shaping → returns → :class:`~comlrl.core.rollout.record.ValueGroup` per agent and
node → rollout log-probs for the ratio loss → old values → TD targets → GAE(λ)), per-agent
buffers and resumable state. Each family's update is its own loop over core's pieces
(:mod:`comlrl.core.training.policy_update`: mini-batches and the policy step on the actor's
rows from :mod:`comlrl.ac.ppo`; a critic step on core's
:func:`~comlrl.core.training.value_step.value_step`), metrics and evaluation in
:mod:`comlrl.ac.metrics`, critic placement in :mod:`comlrl.ac.critics`.

A family fills in the critic: how it is built and placed (``_resolve_critic_sources``,
``_setup_critics``), what it estimates at rollout (``_estimate_values``), how a drained buffer
updates the models (``_update``), and what is saved.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from comlrl.ac.config import ActorCriticConfig
from comlrl.ac.critic_models import ValueModel
from comlrl.ac.metrics import RUN_CONFIG_KEYS, drain_metrics, episode_metrics, evaluation_metrics
from comlrl.ac.samples import ActorCriticInputs, JointSample
from comlrl.ac.targets import fill_critic_targets
from comlrl.core.callable_types import (
    DatasetArg,
    FormatterArg,
    Hook,
    ModelSource,
    RewardArg,
    RewardProcessor,
    TokenizerArg,
)
from comlrl.core.inputs import inputs_from
from comlrl.core.loop.buffer import Batch, BufferEntry, Experience
from comlrl.core.models import resolve_model_sources
from comlrl.core.models.reference import reference_models_for
from comlrl.core.rollout.collect import collect_groups, completion_rows
from comlrl.core.rollout.record import ValueGroup
from comlrl.core.rollout.tree import TreeNode
from comlrl.core.trainer import TrainerBase
from comlrl.core.training.optim import build_adamw


class ActorCriticTrainerBase(TrainerBase):
    """Shared machinery of the actor-critic trainers (compat name of CoMLRL's mix-in). The
    critics' placement, the actor's rows and the metrics are functions of
    :mod:`comlrl.ac.critics`, :mod:`comlrl.ac.ppo` and :mod:`comlrl.ac.metrics`."""

    run_config_keys = RUN_CONFIG_KEYS
    # 1.4.3's actor-critic trainers log every agent's shaped returns and KL per turn.
    turn_metrics_over = "all_agents"

    algorithm_name = "ActorCritic"
    default_config_cls: type[ActorCriticConfig] = ActorCriticConfig
    # The critics' value estimates at rollout are reported apart from generation and updates.
    timing_phases = ("generate", "reward", "values", "update")

    inputs_cls = ActorCriticInputs

    def __init__(
        self,
        agent_model: ModelSource | None = None,
        critic_model: ModelSource | None = None,
        tokenizer: TokenizerArg | None = None,
        reward_func: RewardArg | None = None,
        reward_processor: RewardProcessor | None = None,
        formatters: FormatterArg | None = None,
        args: ActorCriticConfig | None = None,
        train_dataset: DatasetArg | None = None,
        eval_dataset: DatasetArg | None = None,
        model_config: dict | None = None,
        wandb_config: dict | None = None,
        metrics_callback: Hook | None = None,
        external_transition: Hook | None = None,
        agents: Sequence[ModelSource] | None = None,
        critics: Sequence[ModelSource] | None = None,
        *,
        num_agents: int | None = None,
    ) -> None:
        """Build the trainer from CoMLRL 1.4.3's actor-critic arguments, in its order: the
        actors (``agent_model`` or ``agents``), the critics (``critic_model`` or ``critics``;
        none with a value head), the reward and ``formatters``, ``args`` the config (defaults
        when None), the data, and the W&B, per-episode metrics and multi-turn hooks."""
        self.setup(inputs_from(ActorCriticInputs, locals()))

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
        # The buffer holds each agent's groups of K completions, one per tree node; it fills
        # when it holds ``rollout_buffer_size`` completions.
        self.use_buffer(
            math.ceil(a.rollout_buffer_size / a.num_generations),
            ValueGroup,
            self.joint_sample_cls,
        )

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

    def _joint_samples(self, nodes, index, per_agent, values, aux) -> list[list[JointSample]]:
        """Per node, the joint samples of a centralized critic (none by default)."""
        return [[] for _ in nodes]

    def _update(self, buffers: list[list[ValueGroup]], joint: list) -> dict[str, float]:
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
        """Roll out the unit's items into core's rollout record (:func:`~comlrl.core.rollout.
        collect.collect_groups`) with what the critic adds; one record per item (episode):
        each agent's value groups there (old values, TD targets, advantages), the joint
        samples of a centralized critic, and the ``metrics_callback`` metrics."""
        got = collect_groups(
            self,
            unit,
            discount=1.0,
            group_cls=ValueGroup,
            logprob_layout="padded",  # the layout the actor's step scores in
        )
        nodes, per_agent = got.nodes, got.per_agent
        with self.timing.phase("values"):
            joint = self._critic_record(per_agent, nodes)
        self.reporting.offer_completions(lambda: completion_rows(got))
        # The nodes of one item's tree are consecutive in walk order and share its index.
        episodes: dict[int, list[int]] = {}
        for j, node in enumerate(nodes):
            episodes.setdefault(node.item_index, []).append(j)
        entries = []
        for ids in episodes.values():
            mine = [[groups[j] for j in ids] for groups in per_agent]
            entries.append(
                BufferEntry(
                    mine,
                    max(nodes[j].step for j in ids),
                    joint=[js for j in ids for js in joint[j]],
                    metrics=episode_metrics(self.metrics_callback, [nodes[j] for j in ids], mine),
                )
            )
        return Batch(entries)

    def _critic_record(self, per_agent: list[list[ValueGroup]], nodes: list[TreeNode]):
        """What the critic adds to core's record of ``nodes`` (KL-shaped, returns at discount
        1: the undiscounted reward-to-go that 1.4.3 logs as ``expected_return``; the TD
        targets discount; rollout log-probs where the loss forms a ratio): the critics'
        estimates, then the TD targets and advantages
        (:func:`comlrl.ac.targets.fill_critic_targets`). Returns, per node, the joint samples
        of a centralized critic."""
        values, aux = self._estimate_values(nodes)
        index = {id(n): j for j, n in enumerate(nodes)}
        children = self.tree_children(nodes, index)
        a = self.args
        for groups, table in zip(per_agent, values):
            fill_critic_targets(groups, table, children, a.discount, a.gae_lambda, a.uses_q_critic)
        return self._joint_samples(nodes, index, per_agent, values, aux)

    def eval_metrics(self, items: list[dict]) -> dict[str, float]:
        """The core's light eval plus ``metrics_callback``'s ``eval/{k}`` (see
        :func:`comlrl.ac.metrics.evaluation_metrics`)."""
        return evaluation_metrics(self, items)

    def update(self, experience: Experience) -> dict[str, float]:
        """Update actors and critics from a full buffer; returns the training metrics."""
        stats = self._update(experience.samples, experience.joint)
        return drain_metrics(self.args, experience.samples, stats)

    @staticmethod
    def _child(node: TreeNode, action: int) -> TreeNode | None:
        return node.children[action] if node.children else None

    def tree_children(self, nodes: list[TreeNode], index: dict) -> list[list[int | None]]:
        """Per node and joint action, the index of the node it leads to (None at an end)."""
        return [
            [
                None if (child := self._child(n, k)) is None else index[id(child)]
                for k in range(len(n.joint_actions))
            ]
            for n in nodes
        ]

    # ------------------------------------------------------------------ resumable state
    def optimizers_list(self) -> list:
        """Actor optimizers, then critic (or value-head) optimizers."""
        return list(self.agent_optimizers) + list(self.critic_optimizers)

    @property
    def optimizers(self) -> list:
        """The actors' optimizers (the MAGRPO-family attribute name)."""
        return self.agent_optimizers
