"""MAGRPO: multi-agent GRPO. Every agent samples K answers per prompt; joint actions share one
reward (or give each agent its own); each agent is updated by REINFORCE with a group baseline
over its K siblings' returns (its own returns when rewards are per agent)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch

from comlrl.core import algos
from comlrl.core.algos import JointTable
from comlrl.core.buffer import Batch, Experience, Record
from comlrl.core.dropout import dropout_off
from comlrl.core.input_checks import check_agent_count
from comlrl.core.inputs import MAGRPO_STYLE, TrainerInputs, compat_constructor, signature_of
from comlrl.core.logging.completions import tree_rows
from comlrl.core.logprobs import token_logprobs_parts
from comlrl.core.optim import build_adamw
from comlrl.core.ratio import padded_rows
from comlrl.core.reference import reference_models_for
from comlrl.core.rewards.report import agent_reward_metrics
from comlrl.core.rewards.shaping import apply_kl_shaping
from comlrl.core.rewards.weighted import WeightedRewards
from comlrl.core.rollout.record import GroupCodec, RolloutGroup, attach_logprobs, rollout_groups
from comlrl.core.train_step import Target, train_step
from comlrl.core.trainer import TrainerBase
from comlrl.reinforce.advantages import batch_normalize, estimate, normalize_groups
from comlrl.reinforce.config import MAGRPOConfig
from comlrl.reinforce.filters import has_spread, is_truncated
from comlrl.reinforce.greedy import PHASE as GREEDY_PHASE
from comlrl.reinforce.greedy import greedy_baselines
from comlrl.reinforce.kl import kl_loss_term, loss_estimator
from comlrl.reinforce.losses import as_tensor, kept_tokens, row_weights, token_mean_total

# The record's name before it moved into core (kept for imports of it).
NodeSample = RolloutGroup


def joint_table(groups: Sequence[RolloutGroup]) -> JointTable:
    """The joint tables of ``groups`` (one agent's groups, all with the same number of joint
    actions), as the advantage registry's :class:`~comlrl.core.algos.JointTable`."""
    if any(not g.joint_index for g in groups):
        raise ValueError(
            "this advantage_mode reads each node's joint table, which a rollout buffer restored "
            "from a checkpoint of an older release does not hold; resume with the advantage_mode "
            "it was saved with, or start the run again."
        )
    return JointTable(
        torch.tensor([g.joint_returns for g in groups], dtype=torch.float64),
        torch.tensor([g.joint_index for g in groups], dtype=torch.long),
    )


class MAGRPOTrainer(TrainerBase):
    """Multi-agent GRPO trainer (CoMLRL-compatible constructor and methods)."""

    algorithm_name = "MAGRPO"
    default_config_cls = MAGRPOConfig
    __init__ = compat_constructor(signature_of(MAGRPO_STYLE + ("model",)))

    def setup(self, inputs: TrainerInputs) -> None:
        """Check the config type, build the agents, optimizers, references and buffer."""
        args = inputs.args if inputs.args is not None else self.default_config_cls()
        self._check_args_type(args)
        check_agent_count(inputs.agents, inputs.num_agents, type(self))
        if inputs.agents is not None and inputs.agent_model is None:
            inputs = inputs.replace(num_agents=None)
        inputs = self._combine_rewards(inputs, args)
        if args.uses_greedy_baseline() and GREEDY_PHASE not in self.timing_phases:
            self.timing_phases = (*self.timing_phases, GREEDY_PHASE)
        super().setup(inputs.replace(args=args))
        if isinstance(self.reward_func, WeightedRewards):
            self.reward_func.bind(self.num_agents)
        a = self.args
        self.optimizers = [
            build_adamw(m.parameters(), lr=a.agent_learning_rate, weight_decay=a.weight_decay)
            for m in self.agents
        ]
        if a.drop_zero_variance_groups and self.dist.is_distributed:
            raise ValueError(
                "drop_zero_variance_groups needs a single-process run: ranks dropping different "
                "numbers of groups would take different numbers of optimizer steps."
            )
        self.reference_models = reference_models_for(self)
        kl_coef = a.reference_kl_coef if a.reference_kl_enabled else 0.0
        self.use_buffer(a.rollout_buffer_size, GroupCodec(kl_coef))

    def _combine_rewards(self, inputs: TrainerInputs, args) -> TrainerInputs:
        """A list of reward functions (or ``reward_weights``) becomes one weighted sum."""
        funcs = inputs.reward_func
        if not isinstance(funcs, (list, tuple)):
            if args.reward_weights is None:
                return inputs
            funcs = [funcs]
        combined = WeightedRewards(
            funcs,
            args.reward_weights,
            call_mode=args.reward_call_mode,
            recording=lambda: not self.timing.evaluating,
        )
        return inputs.replace(reward_func=combined)

    def _check_args_type(self, args) -> None:
        if not isinstance(args, MAGRPOConfig):
            raise ValueError(
                f"args must be a {self.default_config_cls.__name__} (or another MAGRPOConfig), "
                f"got {type(args).__name__}."
            )

    def items_per_batch(self) -> int:
        return self.args.rollout_batch_size or self.args.rollout_buffer_size

    # ------------------------------------------------------------------ collect
    def collect(self, unit) -> Batch:
        """Roll out the unit's items and shape their rewards; one record per tree node (each
        agent's group there, advantages computed), in env-step order."""
        roots, nodes = self.rollouts.unit_trees(unit, self.args.joint_mode)
        baselines = greedy_baselines(self, nodes) if self.args.uses_greedy_baseline() else None
        kls = apply_kl_shaping(self, roots, nodes)
        per_agent = [
            rollout_groups(nodes, i, None if kls is None else kls[i])
            for i in range(self.num_agents)
        ]
        if baselines is not None:
            for j, per_node in enumerate(baselines):
                for groups, b in zip(per_agent, per_node):
                    groups[j].baseline = b
        attach_logprobs(
            self, per_agent, old=self.policy_loss.needs_old_logps, reference=self.args.beta > 0
        )
        for groups in per_agent:
            self.fill_advantages(groups)
        self.reporting.offer_completions(
            lambda: tree_rows(nodes, [[g.advantages for g in gs] for gs in per_agent])
        )
        order = sorted(range(len(nodes)), key=lambda j: per_agent[0][j].step)
        return Batch(
            [Record([[groups[j]] for groups in per_agent], per_agent[0][j].step) for j in order]
        )

    def fill_advantages(self, groups: Sequence[RolloutGroup]) -> None:
        """Each group's advantages within the group: the configured estimator over the groups'
        ``[G, K]`` returns (and, for an estimator that reads them, the nodes' joint tables),
        then per-group normalization when its scope is ``group`` (batch scope needs the whole
        update and comes later)."""
        a = self.args
        mode = a.advantage_estimator()
        scope_normalize = a.advantage_normalization and a.advantage_normalization_scope == "group"
        wants_table = getattr(
            algos.get("advantage", mode, "advantage_mode"), "needs_joint_table", False
        )
        by_shape: dict[tuple[int, int], list[RolloutGroup]] = {}
        for g in groups:
            by_shape.setdefault((g.size, len(g.joint_index)), []).append(g)
        for same in by_shape.values():
            returns = torch.tensor([g.returns for g in same], dtype=torch.float64)
            baseline = table = None
            if mode == "greedy":
                baseline = torch.tensor([float(g.baseline) for g in same], dtype=torch.float64)
            if wants_table:
                table = joint_table(same)
            adv = estimate(returns, mode, a, baseline, table)
            if scope_normalize:
                adv = normalize_groups(adv, mode, table)
            for g, row in zip(same, adv.tolist()):
                g.advantages = row

    @property
    def policy_loss(self):
        """The registered policy loss that ``args.policy_loss`` names."""
        return algos.get("policy_loss", self.args.policy_loss, "policy_loss")

    # ------------------------------------------------------------------ update
    def update(self, experience: Experience) -> dict[str, float]:
        """Update every agent from its share of a full buffer (concurrently in mp mode)."""
        # Seeds are drawn here, in agent order, so shuffling is reproducible in mp mode too.
        seeds = [self.shuffle_rng.getrandbits(64) for _ in range(self.num_agents)]
        stats = self.workers.map(
            lambda i, arg: self._update_agent(i, *arg), list(zip(experience.samples, seeds))
        )
        metrics = self._metrics(experience.samples[0], stats)
        metrics.update(
            agent_reward_metrics(
                (g.agent, g.turn, g.own_reward) for groups in experience.samples for g in groups
            )
        )
        return metrics

    # ------------------------------------------------------------------ the update
    def _update_agent(self, agent: int, samples: list[RolloutGroup], seed: int) -> dict[str, float]:
        a = self.args
        model, opt = self.agents[agent], self.optimizers[agent]
        model.train()
        losses, norms, extra = [], [], {}
        rng = random.Random(seed)
        # A buffer restored from a checkpoint of the older layout has no advantages yet.
        self.fill_advantages([g for g in samples if not g.advantages])
        if a.drop_zero_variance_groups:
            # Shaped returns: a group whose rewards tie still differs in its KL penalty.
            kept = [g for g in samples if has_spread(g.returns)]
            extra["dropped_groups"] = [float(len(samples) - len(kept))]
            samples = kept
        by_turn: dict[int, list[RolloutGroup]] = {}
        for s in samples:
            by_turn.setdefault(s.turn, []).append(s)
        # Each pass reshuffles; a ratio loss corrects passes after the first (num_iterations).
        # No dropout: the gradient is of the policy that sampled, and old log-probs were taken
        # without it, so the first pass's ratio is exactly 1.
        with dropout_off(model):
            for _ in range(a.num_iterations):
                for turn in sorted(by_turn):
                    group = by_turn[turn]
                    rng.shuffle(group)
                    for start in range(0, len(group), a.train_batch_size):
                        batch = group[start : start + a.train_batch_size]
                        loss, norm, metrics = self._step(agent, model, opt, batch)
                        if loss is not None:
                            losses.append(loss)
                            norms.append(norm)
                            for key, value in metrics.items():
                                extra.setdefault(key, []).append(value)
        return {
            "loss": float(np.mean(losses)) if losses else float("nan"),
            "grad_norm": float(np.mean(norms)) if norms else float("nan"),
            **{key: float(np.mean(values)) for key, values in extra.items()},
        }

    def advantages_for(self, batch: Sequence[RolloutGroup]) -> list[torch.Tensor]:
        """Advantages of every completion in ``batch``, one tensor per group: the groups' own,
        z-scored over the mini-batch when normalization's scope is ``batch``."""
        a = self.args
        self.fill_advantages([g for g in batch if not g.advantages])
        advs = [torch.tensor(g.advantages, dtype=torch.float64) for g in batch]
        if a.advantage_normalization and a.advantage_normalization_scope == "batch":
            flat = torch.cat(advs)
            pooled = self.sync.pooled_moments([flat])
            flat = batch_normalize(flat, pooled[0] if pooled else None)
            advs = list(torch.split(flat, [len(x) for x in advs]))
        return advs

    def _step(self, agent: int, model, opt, batch: list[RolloutGroup]):
        """One optimizer step on a mini-batch of node samples (one padded forward per
        micro-batch, gradients accumulated)."""
        a = self.args
        advs = self.advantages_for(batch)
        prompts, comps, adv_rows, sizes, olds, refs = [], [], [], [], [], []
        for s, adv in zip(batch, advs):
            for j, (c, av) in enumerate(zip(s.completion_ids, adv.tolist())):
                prompts.append(s.prompt_ids)
                comps.append(c)
                adv_rows.append(av)
                sizes.append(len(s.completion_ids))
                olds.append(s.old_logps[j] if s.old_logps else None)
                refs.append(s.ref_logps[j] if s.ref_logps else None)
        lengths = [len(c) for c in comps]
        found: dict[str, list[float]] = {}
        keep = None
        if a.mask_truncated_completions:
            eos = self.tokenizers[agent].eos_token_id
            keep = [not is_truncated(c, eos, a.max_new_tokens) for c in comps]
            found["truncated_fraction"] = [1.0 - sum(keep) / len(keep)]
        weights = row_weights(
            lengths,
            sizes,
            len(batch),
            a.loss_aggregation,
            a.max_new_tokens,
            keep,
            token_total=self._token_total(lengths, keep),
        )
        policy_loss = self.policy_loss
        pad = self.tokenizers[agent].pad_token_id
        # A node's K completions share its prompt; the planner encodes it once per micro-batch
        # where that pays (planning.sharing_pays). Rows stay as they are (no dedupe).
        parts = token_logprobs_parts(
            model,
            prompts,
            comps,
            pad_id=pad,
            max_tokens=a.logprob_max_tokens,
            dedupe=False,
            temperature=a.temperature,  # the rollout's sampler, as the old and reference scores
        )

        def part_loss(part):
            idx, lp = part
            device = lp.values.device
            old = None
            if policy_loss.needs_old_logps:
                old = padded_rows([olds[i] for i in idx], lp.values.shape[1], device)
            row_w = as_tensor([weights[i] for i in idx], device)
            loss, metrics = policy_loss(
                lp, old, as_tensor([adv_rows[i] for i in idx], device), row_w, a
            )
            if a.beta > 0:
                ref = padded_rows([refs[i] for i in idx], lp.values.shape[1], device)
                term, kl_metrics = kl_loss_term(lp, ref, row_w, a.beta, loss_estimator(a))
                loss = loss + term
                metrics = {**metrics, **kl_metrics}
            return loss, metrics

        step = train_step(
            self,
            # One turn's groups (see _update_agent): the monitors' per-turn entropy and clips.
            Target(model.parameters(), opt, agent, turn=batch[0].turn),
            parts,
            part_loss,
            what=f"MAGRPO loss of agent {agent}",
        )
        if step is None:
            return None, None, {}
        for key, values in step.metrics.items():
            found.setdefault(key, []).extend(values)
        return step.loss, step.grad_norm, {key: float(np.mean(v)) for key, v in found.items()}

    def _token_total(self, lengths: list[int], keep) -> float | None:
        """``token_mean``'s divisor under several processes (the ranks' mini-batches share
        one token mean); None, the mini-batch's own count, otherwise."""
        if self.args.loss_aggregation != "token_mean" or not self.dist.is_distributed:
            return None
        pooled = round(self.sync.pooled_total(kept_tokens(lengths, keep)))
        return token_mean_total(pooled, self.dist.world_size)

    # ------------------------------------------------------------------ metrics
    def _metrics(self, samples: list[RolloutGroup], stats: list[dict[str, float]]) -> dict:
        a = self.args
        metrics: dict[str, float] = {}
        by_turn: dict[int, list[RolloutGroup]] = {}
        for s in samples:
            by_turn.setdefault(s.turn, []).append(s)
        for turn, group in sorted(by_turn.items()):
            t = turn + 1
            metrics[f"turn_{t}/reward_mean"] = float(np.mean([s.node_reward for s in group]))
            metrics[f"turn_{t}/expected_return"] = float(np.mean([s.node_return for s in group]))
            if a.reference_kl_enabled:
                kls = [k for s in group for k in s.kls]
                if kls:
                    metrics[f"turn_{t}/reference_kl_mean"] = float(np.mean(kls))
                    metrics[f"turn_{t}/reference_kl_penalty_mean"] = a.reference_kl_coef * float(
                        np.mean(kls)
                    )
        if isinstance(self.reward_func, WeightedRewards):
            for name, value in self.reward_func.drain().items():
                metrics[f"rewards/{name}_mean"] = value
        for i, st in enumerate(stats):
            metrics.update({f"agent_{i}/{key}": value for key, value in st.items()})
        return metrics
