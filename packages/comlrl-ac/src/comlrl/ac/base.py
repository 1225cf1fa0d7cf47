"""What IAC and MAAC share: construction order, episode collection (rollout → KL shaping →
old values → TD targets), per-agent buffers and resumable state. The optimisation steps live in
:mod:`comlrl.ac.steps`, metrics and evaluation in :mod:`comlrl.ac.reporting`, critic placement
in :mod:`comlrl.ac.critics`.

A family fills in the critic: how it is built and placed (``_resolve_critic_sources``,
``_setup_critics``), what it estimates at rollout (``_estimate_values``), how a drained buffer
updates the models (``_update``), and what is saved.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import torch

from comlrl.ac.config import ActorCriticConfig
from comlrl.ac.critics import CriticSetup
from comlrl.ac.reporting import Reporting
from comlrl.ac.samples import Episode, JointSample, RolloutSample
from comlrl.ac.steps import OptimizationSteps
from comlrl.ac.targets import td_target
from comlrl.core.devices import plan_devices
from comlrl.core.logprobs import micro_batches
from comlrl.core.models import resolve_model_sources
from comlrl.core.optim import build_adamw
from comlrl.core.reference import build_reference_models, sequence_kl
from comlrl.core.rollout.tree import TreeNode
from comlrl.core.trainer import TrainerBase
from comlrl.core.values import ValueModel


class ActorCriticTrainerBase(CriticSetup, OptimizationSteps, Reporting, TrainerBase):
    """Shared machinery of the actor-critic trainers (compat name of CoMLRL's mix-in)."""

    algorithm_name = "ActorCritic"
    default_config_cls: type[ActorCriticConfig] = ActorCriticConfig
    # The critics' value estimates at rollout are reported apart from generation and updates.
    timing_phases = ("generate", "reward", "values", "update")

    def __init__(
        self,
        agent_model=None,
        critic_model=None,
        tokenizer=None,
        reward_func=None,
        reward_processor=None,
        formatters=None,
        args=None,
        train_dataset=None,
        eval_dataset=None,
        model_config=None,
        wandb_config=None,
        metrics_callback=None,
        external_transition=None,
        agents=None,
        critics=None,
        *,
        num_agents: int | None = None,
    ):
        """Arguments as in CoMLRL 1.4.3. ``num_agents`` (ours, keyword-only) sets how many
        agents ``agent_model`` builds when ``args.num_agents`` is unset (default 2)."""
        if args is None:
            args = self.default_config_cls()
        if not isinstance(args, self.default_config_cls):
            raise ValueError(
                f"args must be a {self.default_config_cls.__name__}, got {type(args).__name__}."
            )
        # Cheap checks first, in the reference's order, so no model loads for a doomed run.
        if reward_func is None or not callable(reward_func):
            raise ValueError("reward_func must be a callable.")
        if agent_model is None and agents is None:
            raise ValueError("Either agent_model or agents must be provided.")
        if metrics_callback is not None and not callable(metrics_callback):
            raise ValueError(
                f"metrics_callback must be callable or None, got {metrics_callback!r}."
            )
        if agents is None:
            if num_agents is not None and args.num_agents not in (None, num_agents):
                raise ValueError(
                    f"num_agents ({num_agents}) and args.num_agents ({args.num_agents}) differ; "
                    "set one of them."
                )
            num_agents = args.num_agents or num_agents or 2
        count = len(resolve_model_sources(agent_model, agents, num_agents))
        critic_sources = self._resolve_critic_sources(critic_model, critics, count, args)
        self._init_common(
            args=args,
            agent_model=agent_model,
            agents=agents,
            num_agents=num_agents,
            tokenizer=tokenizer,
            model_config=model_config,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            reward_func=reward_func,
            reward_processor=reward_processor,
            formatters=formatters,
            external_transition=external_transition,
            wandb_config=wandb_config,
            eval_logger=None,
            eval_aggregator=None,
        )
        self.metrics_callback = metrics_callback
        sections = (wandb_config or {}).get("config_sections") or {}
        self.verbose = bool((sections.get("output") or {}).get("verbose", True))
        a = self.args
        self.agent_optimizers = [
            build_adamw(m.parameters(), lr=a.agent_learning_rate, weight_decay=a.weight_decay)
            for m in self.agents
        ]
        self.critics: list[ValueModel] = []
        self.critic_optimizers: list[torch.optim.Optimizer] = []
        self._setup_critics(critic_sources)
        self.reference_models: list = []
        if a.reference_kl_enabled:
            devices = (
                plan_devices("mp", a.reference_devices, self.num_agents, "reference_devices")
                if a.reference_devices is not None
                else self.agent_devices
            )
            self.reference_models = build_reference_models(
                self.agents, self.sources, devices, self.model_config
            )
        self.rollout_buffers: list[list[RolloutSample]] = [[] for _ in range(self.num_agents)]
        self.shuffle_rng = random.Random(a.seed if a.seed is not None else 0)
        self._last_train_log_step = -1
        self._eval_capture: list | None = None
        self.skipped_nonfinite = 0
        self.logger = None

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

    def _update(self, buffers: list[list[RolloutSample]]) -> dict[str, float]:
        """Update actors and critics from drained buffers; return metrics to log."""
        raise NotImplementedError

    def _buffer_joint(self, joint: list[JointSample]) -> None:
        """Keep joint samples for the centralized critic (MAAC)."""

    # ------------------------------------------------------------------ rollout capture
    def rollout(self, items, num_samples, params, **kwargs):
        roots = super().rollout(items, num_samples, params, **kwargs)
        if self._eval_capture is not None:
            self._eval_capture.extend(roots)
        return roots

    def items_per_batch(self) -> int:
        """Items rolled out together: enough to fill one buffer (``rollout_batch_size``
        overrides)."""
        a = self.args
        if a.rollout_batch_size:
            return a.rollout_batch_size
        per_item = a.num_generations * a.num_turns
        return max(1, math.ceil(a.rollout_buffer_size / per_item))

    # ------------------------------------------------------------------ one batch
    def _train_batch(self, items: list[dict], generation_kwargs: dict) -> None:
        a = self.args
        params = self.sampling_params(generation_kwargs)
        roots = self.rollout(
            items,
            a.num_generations,
            params,
            joint_mode="aligned",
            early_termination_threshold=a.early_termination_threshold,
            env_step_start=self.env_step,
        )
        nodes = [node for root in roots for node in root.walk()]
        self.env_step = max(n.env_step for n in nodes)
        self._last_reward_mean = float(np.mean([r for n in nodes for r in n.rewards]))
        for episode in self._collect(roots):
            self._report_episode(episode)
            for i in range(self.num_agents):
                self.rollout_buffers[i].extend(episode.samples[i])
            self._buffer_joint(episode.joint)
            if len(self.rollout_buffers[0]) >= a.rollout_buffer_size:
                self._drain_buffers()

    def _make_sample(self, agent: int, node: TreeNode, action: int) -> RolloutSample:
        k = node.joint_actions[action][agent]
        ps = node.samples[agent]
        return RolloutSample(
            agent_idx=agent,
            prompt=node.prompts[agent],
            completion=ps.texts[k],
            prompt_ids=list(ps.prompt_ids),
            completion_ids=list(ps.completion_ids[k]),
            reward=float(node.rewards[action]),
            returns=0.0,
            advantage=None,
            old_value=None,
            value_target=None,
            turn_idx=node.turn,
            generation_idx=k,
            env_step=node.env_step,
            metadata={"turn_idx": node.turn, "generation_idx": k, "batch_item": node.item},
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
        gamma = self.args.discount
        for i in range(self.num_agents):
            for j in range(len(nodes) - 1, -1, -1):
                for k, s in enumerate(samples[i][j]):
                    child = self._child(nodes[j], k)
                    later = 0.0
                    if child is not None:
                        later = float(np.mean([c.returns for c in samples[i][index[id(child)]]]))
                    s.returns = s.shaped_reward + gamma * later
        return samples

    @staticmethod
    def _child(node: TreeNode, action: int) -> TreeNode | None:
        return node.children[action] if node.children else None

    def _collect(self, roots: list[TreeNode]) -> list[Episode]:
        """Samples with old values, TD targets and advantages, grouped by item."""
        nodes = [node for root in roots for node in root.walk()]
        index = {id(n): j for j, n in enumerate(nodes)}
        samples = self._tree_samples(nodes)
        with self.timed("values"):
            values, aux = self._estimate_values(nodes)
        gamma = self.args.discount
        for i in range(self.num_agents):
            for j, node in enumerate(nodes):
                for k, s in enumerate(samples[i][j]):
                    child = self._child(node, k)
                    next_value = values[i][index[id(child)]][0] if child is not None else None
                    s.old_value = float(values[i][j][k])
                    s.value_target = td_target(s.shaped_reward, next_value, gamma)
                    s.advantage = s.value_target - s.old_value
                    s.metadata["value_target"] = s.value_target
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

    def _attach_reference_kl(self, samples: list[list[list[RolloutSample]]]) -> None:
        """KL to the frozen reference per sample, subtracted from the reward (shaping only)."""
        coef = self.args.reference_kl_coef

        def run(i: int, _arg) -> list[float]:
            flat = [s for per_node in samples[i] for s in per_node]
            lengths = [len(s.prompt_ids) + len(s.completion_ids) for s in flat]
            kls = [0.0] * len(flat)
            pad = self.tokenizers[i].pad_token_id
            for idx in micro_batches(lengths, self.args.logprob_max_tokens):
                part = sequence_kl(
                    self.agents[i],
                    self.reference_models[i],
                    [flat[j].prompt_ids for j in idx],
                    [flat[j].completion_ids for j in idx],
                    pad,
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

    # ------------------------------------------------------------------ buffers
    def _end_epoch(self) -> None:
        if any(self.rollout_buffers):
            self._drain_buffers()

    def _drain_buffers(self) -> None:
        """Update from the buffers; samples leave them only after the update succeeded."""
        with self.timed("update"):
            buffers = [list(b) for b in self.rollout_buffers]
            stats = self._update(buffers)
            for i in range(self.num_agents):
                self.rollout_buffers[i] = []
        self._log_drain(buffers, stats)

    # ------------------------------------------------------------------ resumable state
    def optimizers_list(self) -> list:
        """Actor optimizers, then critic (or value-head) optimizers."""
        return list(self.agent_optimizers) + list(self.critic_optimizers)

    @property
    def optimizers(self) -> list:
        """The actors' optimizers (the MAGRPO-family attribute name)."""
        return self.agent_optimizers

    def _family_state_dict(self) -> dict[str, Any]:
        return {
            "rollout_buffers": [[s.to_state() for s in b] for b in self.rollout_buffers],
            "shuffle_rng": self.shuffle_rng.getstate(),
            "last_train_log_step": self._last_train_log_step,
            "skipped_nonfinite": self.skipped_nonfinite,
        }

    def _load_family_state_dict(self, state: dict[str, Any]) -> None:
        self.rollout_buffers = [
            [RolloutSample.from_state(s) for s in b] for b in state["rollout_buffers"]
        ]
        rng_state = state["shuffle_rng"]
        self.shuffle_rng.setstate((rng_state[0], tuple(rng_state[1]), rng_state[2]))
        self._last_train_log_step = state["last_train_log_step"]
        self.skipped_nonfinite = state["skipped_nonfinite"]
