"""MAGRPO: multi-agent GRPO. Every agent samples K answers per prompt; joint actions share one
reward (or give each agent its own); each agent is updated by REINFORCE with a group baseline
over its K siblings' returns (its own returns when rewards are per agent)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from comlrl.core import algos
from comlrl.core.algos import JointTable
from comlrl.core.algos.losses import estimator_for
from comlrl.core.callable_types import (
    DatasetArg,
    FormatterArg,
    Hook,
    ModelSource,
    RewardArg,
    RewardProcessor,
    TokenizerArg,
)
from comlrl.core.input_checks import check_agent_count
from comlrl.core.inputs import TrainerInputs, inputs_from
from comlrl.core.loop.buffer import Batch, BufferEntry, Experience
from comlrl.core.models.reference import reference_models_for
from comlrl.core.rewards.weighted import WeightedRewards
from comlrl.core.rollout.collect import collect_groups, completion_rows, node_order
from comlrl.core.rollout.record import RolloutGroup
from comlrl.core.rollout.tree import nodes_per_tree
from comlrl.core.trainer import TrainerBase
from comlrl.core.training.dropout import dropout_off
from comlrl.core.training.optim import build_adamw
from comlrl.core.training.policy_update import (
    PolicyRows,
    UpdateLog,
    agent_rngs,
    group_rows,
    minibatches,
    policy_step,
)
from comlrl.reinforce.algos import (
    batch_normalize,
    group_advantages,
    kept_tokens,
    reads_joint_table,
    row_weights,
    token_mean_total,
)
from comlrl.reinforce.config import MAGRPOConfig
from comlrl.reinforce.filters import has_spread, is_truncated
from comlrl.reinforce.greedy import PHASE as GREEDY_PHASE
from comlrl.reinforce.greedy import greedy_baselines

# 1.4.3's name for one node's samples, which its import paths export.
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
    # 1.4.3's MAGRPO logs the first agent's nodes' (unshaped) mean return and KL per turn.
    turn_metrics_over = "first_agent"
    default_config_cls = MAGRPOConfig

    def __init__(
        self,
        agent_model: ModelSource | None = None,
        agents: Sequence[ModelSource] | None = None,
        num_agents: int | None = 2,
        tokenizer: TokenizerArg | None = None,
        model_config: dict | None = None,
        train_dataset: DatasetArg | None = None,
        eval_dataset: DatasetArg | None = None,
        dataset_type: str | None = None,
        reward_func: RewardArg | None = None,
        reward_processor: RewardProcessor | None = None,
        formatters: FormatterArg | None = None,
        external_transition: Hook | None = None,
        wandb_config: dict | None = None,
        eval_logger: Hook | None = None,
        eval_aggregator: Hook | None = None,
        args: MAGRPOConfig | None = None,
        model: ModelSource | None = None,
    ) -> None:
        """Build the trainer from CoMLRL 1.4.3's arguments, in its order: one ``agent_model``
        for ``num_agents`` agents or a list of ``agents``; the data, the reward and the
        per-agent ``formatters``; optional multi-turn ``external_transition``, W&B and
        evaluation hooks; ``args`` the config (defaults when None). ``model`` is CoMLRL's older
        name of ``agent_model``."""
        self.setup(inputs_from(TrainerInputs, locals()))

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
        self.use_buffer(a.rollout_buffer_size, RolloutGroup)

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
        """Items rolled out together: enough full trees to fill one buffer of
        ``rollout_buffer_size`` nodes (one node per item in one turn), unless
        ``rollout_batch_size`` says."""
        a = self.args
        if a.rollout_batch_size:
            return a.rollout_batch_size
        agents = getattr(self, "num_agents", None) or a.num_agents or 1
        nodes = nodes_per_tree(a.num_turns, a.num_generations, a.joint_mode, agents)
        return max(1, math.ceil(a.rollout_buffer_size / nodes))

    # ------------------------------------------------------------------ collect
    def collect(self, unit) -> Batch:
        """Roll out the unit's items into core's rollout record (shaped rewards, returns,
        rollout and reference log-probs), with each group's advantages; one buffer record per
        tree node, in env-step order."""
        greedy = self.args.uses_greedy_baseline()
        got = collect_groups(
            self,
            unit,
            joint_mode=self.args.joint_mode,
            inspect=(lambda nodes: greedy_baselines(self, nodes)) if greedy else None,
        )
        per_agent = got.per_agent
        if got.seen is not None:  # MAReMax's greedy baselines, one per node and agent
            for j, per_node in enumerate(got.seen):
                for groups, b in zip(per_agent, per_node):
                    groups[j].baseline = b
        for groups in per_agent:
            self.fill_advantages(groups)
        self.reporting.offer_completions(lambda: completion_rows(got))
        # A multi-turn collect holds several turns' nodes: all of them are trained in the next
        # update (the default loss has no ratio to correct samples of an older policy).
        return Batch(
            [
                BufferEntry([[groups[j]] for groups in per_agent], per_agent[0][j].step)
                for j in node_order(per_agent)
            ],
            whole=self.args.num_turns > 1,
        )

    def fill_advantages(self, groups: Sequence[RolloutGroup]) -> None:
        """Each group's advantages within the group (:func:`comlrl.reinforce.algos.group_advantages`
        over the ``[G, K]`` returns of groups of one shape, with MAReMax's measured baselines
        and, for an estimator that reads them, the nodes' joint tables)."""
        mode = self.args.advantage_mode
        by_shape: dict[tuple[int, int], list[RolloutGroup]] = {}
        for g in groups:
            by_shape.setdefault((len(g.completion_ids), len(g.joint_index)), []).append(g)
        for same in by_shape.values():
            returns = torch.tensor([g.returns for g in same], dtype=torch.float64)
            baseline = table = None
            if mode == "greedy":
                baseline = torch.tensor([float(g.baseline) for g in same], dtype=torch.float64)
            if reads_joint_table(mode):
                table = joint_table(same)
            adv = group_advantages(returns, self.args, baseline=baseline, table=table)
            for g, row in zip(same, adv.tolist()):
                g.advantages = row

    @property
    def policy_loss(self):
        """The registered policy loss that ``args.policy_loss`` names."""
        return algos.get("policy_loss", self.args.policy_loss, "policy_loss")

    # ------------------------------------------------------------------ update
    def update(self, experience: Experience) -> dict[str, float]:
        """Update every agent from its share of a full buffer (concurrently across devices in
        ``mp`` mode), then report the agents' means."""
        work = list(zip(experience.samples, agent_rngs(self.shuffle_rng, self.num_agents)))
        return self._metrics(self.workers.map(self._update_agent, work))

    def _update_agent(self, agent: int, work) -> dict[str, float]:
        """``num_iterations`` passes over the agent's groups in mini-batches by turn, one
        policy step per mini-batch on this family's rows."""
        groups, rng = work
        a, log = self.args, UpdateLog()
        if a.drop_zero_variance_groups:
            # Shaped returns: a group whose rewards tie still differs in its KL penalty.
            kept = [g for g in groups if has_spread(g.returns)]
            log.value("dropped_groups", len(groups) - len(kept))
            groups = kept
        model = self.agents[agent]
        model.train()
        with dropout_off(model):  # the policy that sampled, so a first pass's ratio is 1
            for batch in minibatches(list(groups), a, rng):
                log.step(policy_step(self, agent, self.policy_rows(agent, batch)))
        return log.means()

    def advantages_for(self, batch: Sequence[RolloutGroup]) -> list[torch.Tensor]:
        """Advantages of every completion in ``batch``, one tensor per group: the groups' own,
        z-scored over the mini-batch when normalization's scope is ``batch``."""
        a = self.args
        self.fill_advantages([g for g in batch if not g.advantages])
        advs = [torch.tensor(g.advantages, dtype=torch.float64) for g in batch]
        if a.advantage_normalization and a.advantage_normalization_scope == "batch":
            pooled = self.sync.pooled_moments([torch.cat(advs)])
            advs = batch_normalize(advs, pooled[0] if pooled else None)
        return advs

    def policy_rows(self, agent: int, batch: list[RolloutGroup]) -> PolicyRows:
        """One mini-batch of ``agent``'s groups as the policy loss's rows: advantages (batch
        normalization here), ``loss_aggregation``'s row weights with truncated completions
        masked, and the KL-to-reference loss term's coefficient ``beta``."""
        a = self.args
        cols = group_rows(batch, [adv.tolist() for adv in self.advantages_for(batch)])
        comps = cols["completions"]
        lengths = [len(c) for c in comps]
        found: dict[str, list[float]] = {}
        keep = None
        if a.mask_truncated_completions:
            eos = self.tokenizers[agent].eos_token_id
            keep = [not is_truncated(c, eos, a.max_new_tokens) for c in comps]
            found["truncated_fraction"] = [1.0 - sum(keep) / len(keep)]
        weights = row_weights(
            lengths,
            cols["sizes"],
            len(batch),
            a.loss_aggregation,
            a.max_new_tokens,
            keep,
            token_total=self._token_total(lengths, keep),
        )
        return PolicyRows(
            cols["prompts"],
            comps,
            cols["advantages"],
            weights,
            turn=batch[0].turn,
            old=cols["old"],
            ref=cols["ref"],
            metrics=found,
            kl_coef=a.beta,
            kl_estimator=estimator_for(a, "loss"),
        )

    def _token_total(self, lengths: list[int], keep) -> float | None:
        """``token_mean``'s divisor under several processes (the ranks' mini-batches share
        one token mean); None, the mini-batch's own count, otherwise."""
        if self.args.loss_aggregation != "token_mean" or not self.dist.is_distributed:
            return None
        pooled = round(self.sync.pooled_total(kept_tokens(lengths, keep)))
        return token_mean_total(pooled, self.dist.world_size)

    # ------------------------------------------------------------------ metrics
    def _metrics(self, stats: list[dict[str, float]]) -> dict:
        """The update's own values: the weighted rewards' parts and each agent's means (core's
        reporting adds the per-turn rewards, returns and KL from the record)."""
        metrics: dict[str, float] = {}
        if isinstance(self.reward_func, WeightedRewards):
            for name, value in self.reward_func.drain().items():
                metrics[f"rewards/{name}_mean"] = value
        for i, st in enumerate(stats):
            metrics.update({f"agent_{i}/{key}": value for key, value in st.items()})
        return metrics
