"""MAGRPO: multi-agent GRPO. Every agent samples K answers per prompt; joint actions share one
reward; each agent is updated by REINFORCE with a group baseline over its K siblings."""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from comlrl.core.devices import plan_devices
from comlrl.core.logprobs import score_parts
from comlrl.core.optim import build_adamw
from comlrl.core.reference import build_reference_models, sequence_kl
from comlrl.core.rollout.tree import TreeNode, agent_returns
from comlrl.core.sharding import clip_gradients
from comlrl.core.trainer import TrainerBase
from comlrl.reinforce.advantages import batch_normalize, group_advantages
from comlrl.reinforce.config import MAGRPOConfig


@dataclass
class NodeSample:
    """One agent's K completions at one tree node, with their credit."""

    agent_idx: int
    turn_idx: int
    prompt_ids: list[int]
    completion_ids: list[list[int]]
    returns: list[float]
    node_mean_reward: float
    node_mean_return: float
    node_env_step: int
    reference_kls: list[float] = field(default_factory=list)

    def to_state(self) -> dict[str, Any]:
        """Plain data for checkpoints."""
        return dict(self.__dict__)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> NodeSample:
        """Inverse of :meth:`to_state`."""
        return cls(**state)


class MAGRPOTrainer(TrainerBase):
    """Multi-agent GRPO trainer (CoMLRL-compatible constructor and methods)."""

    algorithm_name = "MAGRPO"
    default_config_cls = MAGRPOConfig

    def __init__(
        self,
        agent_model=None,
        agents=None,
        num_agents: int | None = 2,
        tokenizer=None,
        model_config=None,
        train_dataset=None,
        eval_dataset=None,
        dataset_type=None,
        reward_func=None,
        reward_processor=None,
        formatters=None,
        external_transition=None,
        wandb_config=None,
        eval_logger=None,
        eval_aggregator=None,
        args=None,
        model=None,
    ):
        if model is not None and agent_model is None:
            agent_model = model  # older CoMLRL spelling
        if args is None:
            args = self.default_config_cls()
        self._check_args_type(args)
        if agents is not None and agent_model is None:
            num_agents = None
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
            eval_logger=eval_logger,
            eval_aggregator=eval_aggregator,
        )
        self.dataset_type = dataset_type
        sections = (wandb_config or {}).get("config_sections") or {}
        self.verbose = bool((sections.get("output") or {}).get("verbose", True))
        a = self.args
        self.optimizers = [
            build_adamw(m.parameters(), lr=a.agent_learning_rate, weight_decay=a.weight_decay)
            for m in self.agents
        ]
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
        self.rollout_buffers: list[list[NodeSample]] = [[] for _ in range(self.num_agents)]
        self.shuffle_rng = random.Random(a.seed if a.seed is not None else 0)
        self._last_train_log_step = -1
        self.skipped_nonfinite = 0
        self.logger = None

    def _check_args_type(self, args) -> None:
        if not isinstance(args, MAGRPOConfig):
            raise ValueError(
                f"args must be a {self.default_config_cls.__name__} (or another MAGRPOConfig), "
                f"got {type(args).__name__}."
            )

    # ------------------------------------------------------------------ batching
    def items_per_batch(self) -> int:
        return self.args.rollout_batch_size or self.args.rollout_buffer_size

    # ------------------------------------------------------------------ one batch
    def _train_batch(self, items: list[dict], generation_kwargs: dict) -> None:
        a = self.args
        params = self.sampling_params(generation_kwargs)
        roots = self.rollout(
            items,
            a.num_generations,
            params,
            joint_mode=a.joint_mode,
            early_termination_threshold=a.early_termination_threshold,
            env_step_start=self.env_step,
        )
        nodes = [node for root in roots for node in root.walk()]
        self.env_step = max(n.env_step for n in nodes)
        per_agent = [[self._node_sample(node, i) for node in nodes] for i in range(self.num_agents)]
        if self.reference_models:
            self._attach_reference_kl(per_agent)
        rewards = [r for n in nodes for r in n.rewards]
        self._last_reward_mean = float(np.mean(rewards))
        self._buffer_samples(per_agent)

    def _node_sample(self, node: TreeNode, agent: int) -> NodeSample:
        return NodeSample(
            agent_idx=agent,
            turn_idx=node.turn,
            prompt_ids=list(node.samples[agent].prompt_ids),
            completion_ids=[list(c) for c in node.samples[agent].completion_ids],
            returns=agent_returns(node, agent),
            node_mean_reward=float(np.mean(node.rewards)),
            node_mean_return=float(np.mean(node.returns)),
            node_env_step=node.env_step,
        )

    def _attach_reference_kl(self, per_agent: list[list[NodeSample]]) -> None:
        for i, samples in enumerate(per_agent):
            prompts = [s.prompt_ids for s in samples for _ in s.completion_ids]
            comps = [c for s in samples for c in s.completion_ids]
            kls = sequence_kl(
                self.agents[i],
                self.reference_models[i],
                prompts,
                comps,
                self.tokenizers[i].pad_token_id,
            )
            pos = 0
            for s in samples:
                s.reference_kls = kls[pos : pos + len(s.completion_ids)]
                pos += len(s.completion_ids)

    def _buffer_samples(self, per_agent: list[list[NodeSample]]) -> None:
        """Feed samples step by step (env order); drain every agent whose buffer is full."""
        order = sorted(range(len(per_agent[0])), key=lambda j: per_agent[0][j].node_env_step)
        for j in order:
            for i in range(self.num_agents):
                self.rollout_buffers[i].append(per_agent[i][j])
            if len(self.rollout_buffers[0]) >= self.args.rollout_buffer_size:
                self._drain_buffers()

    def _end_epoch(self) -> None:
        if any(self.rollout_buffers):
            self._drain_buffers()

    def _drain_buffers(self) -> None:
        """Update every agent from its buffer; samples leave the buffer only after success."""
        with self.timed("update"):
            buffers = [list(b) for b in self.rollout_buffers]
            # Seeds are drawn here, in agent order, so shuffling is reproducible in mp mode too.
            seeds = [self.shuffle_rng.getrandbits(64) for _ in range(self.num_agents)]
            stats = self.workers.map(
                lambda i, arg: self._update_agent(i, *arg), list(zip(buffers, seeds))
            )
            for i in range(self.num_agents):
                self.rollout_buffers[i] = []
        self._log_drain(buffers[0], stats)

    # ------------------------------------------------------------------ the update
    def _update_agent(self, agent: int, samples: list[NodeSample], seed: int) -> dict[str, float]:
        a = self.args
        model, opt = self.agents[agent], self.optimizers[agent]
        model.train()
        losses, norms = [], []
        rng = random.Random(seed)
        by_turn: dict[int, list[NodeSample]] = {}
        for s in samples:
            by_turn.setdefault(s.turn_idx, []).append(s)
        for turn in sorted(by_turn):
            group = by_turn[turn]
            rng.shuffle(group)
            for start in range(0, len(group), a.train_batch_size):
                batch = group[start : start + a.train_batch_size]
                loss, norm = self._step(agent, model, opt, batch)
                if loss is not None:
                    losses.append(loss)
                    norms.append(norm)
        return {
            "loss": float(np.mean(losses)) if losses else float("nan"),
            "grad_norm": float(np.mean(norms)) if norms else float("nan"),
        }

    def advantages_for(self, batch: Sequence[NodeSample]) -> list[torch.Tensor]:
        """Advantages of every completion in ``batch``, one tensor per node sample."""
        a = self.args
        advs = []
        for s in batch:
            returns = list(s.returns)
            if s.reference_kls:
                returns = [r - a.reference_kl_coef * kl for r, kl in zip(returns, s.reference_kls)]
            scope_normalize = (
                a.advantage_normalization and a.advantage_normalization_scope == "group"
            )
            advs.append(group_advantages(returns, a.advantage_mode, scope_normalize))
        if a.advantage_normalization and a.advantage_normalization_scope == "batch":
            flat = torch.cat(advs)
            pooled = self.pooled_moments([flat])
            flat = batch_normalize(flat, pooled[0] if pooled else None)
            advs = list(torch.split(flat, [len(x) for x in advs]))
        return advs

    def _step(self, agent: int, model, opt, batch: list[NodeSample]):
        """One optimizer step on a mini-batch of node samples (one padded forward per
        micro-batch, gradients accumulated)."""
        a = self.args
        advs = self.advantages_for(batch)
        prompts, comps, weights = [], [], []
        for s, adv in zip(batch, advs):
            k = len(s.completion_ids)
            for c, av in zip(s.completion_ids, adv.tolist()):
                prompts.append(s.prompt_ids)
                comps.append(c)
                w = av / (k * len(batch))
                if a.loss_length_normalization == "token_mean":
                    w /= max(1, len(c))
                elif a.loss_length_normalization == "constant":
                    w /= a.max_new_tokens
                weights.append(w)
        pad = self.tokenizers[agent].pad_token_id
        opt.zero_grad(set_to_none=True)
        total = 0.0
        # A node's K completions share its prompt: each micro-batch encodes a prompt once.
        # Rows stay as they are (no dedupe), so the forwards and their float sums are unchanged.
        parts = score_parts(
            model,
            prompts,
            comps,
            pad_id=pad,
            max_tokens=a.logprob_max_tokens,
            dedupe=False,
            layout="shared_prompt",
        )
        for idx, lp in parts:
            w = torch.tensor(
                [weights[i] for i in idx], dtype=torch.float32, device=lp.values.device
            )
            loss = -(w * lp.sequence_sum()).sum()
            if not torch.isfinite(loss):
                if a.nonfinite_loss == "skip":
                    self.skipped_nonfinite += 1
                    warnings.warn(
                        f"Skipping a non-finite MAGRPO loss for agent {agent} "
                        f"({self.skipped_nonfinite} skipped so far).",
                        stacklevel=2,
                    )
                    opt.zero_grad(set_to_none=True)
                    return None, None
                raise FloatingPointError(
                    f"Non-finite MAGRPO loss ({loss.item()}) for agent {agent}; set "
                    "nonfinite_loss='skip' to skip such batches instead."
                )
            loss.backward()
            total += loss.item()
        norm = float("nan")
        self.sync_gradients(model.parameters())  # average over ranks (multi-process training)
        params = [p for p in model.parameters() if p.grad is not None]
        if params:
            max_norm = a.max_grad_norm if a.max_grad_norm is not None else math.inf
            norm = clip_gradients(params, max_norm)  # sharded (FSDP) or not
        opt.step()
        return total, norm

    # ------------------------------------------------------------------ logging
    def _log_drain(self, samples: list[NodeSample], stats: list[dict[str, float]]) -> None:
        a = self.args
        step = max(s.node_env_step for s in samples)
        if not (
            a.logging_steps <= 1
            or self._last_train_log_step < 0
            or step - self._last_train_log_step >= a.logging_steps
        ):
            return
        self._last_train_log_step = step
        metrics: dict[str, float] = {}
        by_turn: dict[int, list[NodeSample]] = {}
        for s in samples:
            by_turn.setdefault(s.turn_idx, []).append(s)
        for turn, group in sorted(by_turn.items()):
            t = turn + 1
            metrics[f"turn_{t}/reward_mean"] = float(np.mean([s.node_mean_reward for s in group]))
            metrics[f"turn_{t}/expected_return"] = float(
                np.mean([s.node_mean_return for s in group])
            )
            if a.reference_kl_enabled:
                kls = [k for s in group for k in s.reference_kls]
                if kls:
                    metrics[f"turn_{t}/reference_kl_mean"] = float(np.mean(kls))
                    metrics[f"turn_{t}/reference_kl_penalty_mean"] = a.reference_kl_coef * float(
                        np.mean(kls)
                    )
        for i, st in enumerate(stats):
            metrics[f"agent_{i}/loss"] = st["loss"]
            metrics[f"agent_{i}/grad_norm"] = st["grad_norm"]
        metrics.update(self.timing.drain())
        self.log_metrics(metrics, step)

    # ------------------------------------------------------------------ resumable state
    def _family_state_dict(self) -> dict[str, Any]:
        return {
            "rollout_buffers": [[s.to_state() for s in b] for b in self.rollout_buffers],
            "shuffle_rng": self.shuffle_rng.getstate(),
            "last_train_log_step": self._last_train_log_step,
            "skipped_nonfinite": self.skipped_nonfinite,
        }

    def _load_family_state_dict(self, state: dict[str, Any]) -> None:
        self.rollout_buffers = [
            [NodeSample.from_state(s) for s in b] for b in state["rollout_buffers"]
        ]
        rng_state = state["shuffle_rng"]
        self.shuffle_rng.setstate((rng_state[0], tuple(rng_state[1]), rng_state[2]))
        self._last_train_log_step = state["last_train_log_step"]
        self.skipped_nonfinite = state["skipped_nonfinite"]
