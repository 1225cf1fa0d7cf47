"""MADPOIter and MARLHFIter: preference learning repeated online against a comparator policy.

Each iteration (a stage of the loop):

1. the current policy (the *target*) samples ``preference_num_candidates`` joint candidates per
   item and the comparator ``comparator_num_candidates``; both are scored by the task reward (or,
   in MARLHFIter with ``preference_scoring_reward="reward_model"``, by the previous reward model);
2. target-vs-comparator pairs with a reward gap are selected per item;
3. the iteration's pairs are registered with the replay store, which returns the training pairs
   (``preference_replay_mode``), and the reward distribution is logged when asked;
4. MADPOIter runs ``num_train_epochs`` DPO epochs on them; MARLHFIter trains the reward model on
   them and then runs ``num_train_epochs`` RL epochs;
5. a policy snapshot is saved when the history comparator (or ``policy_checkpoint_dir``) needs it.
"""

from __future__ import annotations

import functools
from typing import Any

from comlrl.core.centralized import CentralizedCollaboration
from comlrl.core.distributed import (
    all_gather_objects,
    all_reduce_sum,
    barrier,
    broadcast_object,
)
from comlrl.core.rewards.ranges import get_reward_range
from comlrl.pbrl import drift
from comlrl.pbrl.api import ApiClient, ApiSettings
from comlrl.pbrl.base import PreferenceTrainerBase
from comlrl.pbrl.comparator_pairs import ComparatorPairs
from comlrl.pbrl.iter_config import MADPOIterConfig, MARLHFIterConfig
from comlrl.pbrl.madpo import MADPOTrainer
from comlrl.pbrl.marlhf import MARLHFTrainer
from comlrl.pbrl.pairs import PreferencePair
from comlrl.pbrl.replay import ReplayStore
from comlrl.pbrl.snapshots import (
    INITIAL,
    save_policy,
    snapshot_name,
)


class IterativeMixin(ComparatorPairs):
    """The iteration loop shared by MADPOIter and MARLHFIter (see the module docstring)."""

    run_config_keys = PreferenceTrainerBase.run_config_keys + (
        "num_iterations",
        "comparator_policy",
        "comparator_generation_mode",
        "preference_replay_mode",
        "comparator_num_candidates",
    )

    # ------------------------------------------------------------------ construction
    def _validate_before_loading(self, args, *, agent_model, agents, num_agents) -> None:
        super()._validate_before_loading(
            args, agent_model=agent_model, agents=agents, num_agents=num_agents
        )
        if args.log_reward_distribution and self.task_reward_func is not None:
            if get_reward_range(self.task_reward_func) is None:
                raise ValueError(
                    "log_reward_distribution=True needs reward_func.reward_range; declare it with "
                    "comlrl.core.rewards.set_reward_range(reward_func, low, high)."
                )
        if args.collaboration_mode == "centralized":
            actors = 1
        elif agents is not None and agent_model is None:
            actors = len(agents)
        else:
            actors = num_agents if num_agents is not None else (args.num_agents or 2)
        entries = args.comparator_agents
        if entries is not None and len(entries) not in (1, actors):
            raise ValueError(
                f"comparator_agents has {len(entries)} entries; give 1 (shared) or one per actor "
                f"({actors})."
            )
        if (
            args.comparator_generation_mode == "centralized"
            and args.collaboration_mode != "centralized"
            and args.comparator_centralized_agent_index >= actors
        ):
            raise ValueError(
                f"comparator_centralized_agent_index must be < the number of agents ({actors})."
            )
        self.api_client = None
        if args.comparator_policy == "api":
            self.api_client = ApiClient(ApiSettings.from_config(args))

    def _init_iterative(self) -> None:
        a = self.args
        self.iteration_pairs: list[PreferencePair] = []
        self.comparator_calls = 0
        seed = a.seed if a.seed is not None else 0
        self.comparator_seed = seed * 1_000_003 + 7919
        self.snapshots_enabled = (
            a.comparator_policy == "history" or a.policy_checkpoint_dir is not None
        )
        self.replay = ReplayStore(
            a.preference_replay_mode,
            a.preference_replay_k,
            a.preference_replay_lambda,
            a.preference_replay_sample_size,
            directory="",
            seed=seed,
            always_write=a.preference_replay_dir is not None,
        )
        # The joint prompt of a centralized comparator, and how its output is split per actor.
        if self.collaboration is not None:
            self._joint_builder = self.collaboration
            self._splitter = None
        else:
            self._joint_builder = CentralizedCollaboration(
                self.centralized_comparator_adapter, self.formatters, self.num_agents
            )
            self._splitter = self._joint_builder
        self._comparator_devices()  # a device list of the wrong length fails here, not later
        self._model_comparators = None
        if a.comparator_policy == "model":
            self._model_comparators = self._load_model_comparators()
        self.reward_histogram = None
        if a.log_reward_distribution:
            low, high = self.reward_range
            self.reward_histogram = drift.RewardHistogram(low, high)

    # ------------------------------------------------------------------ the stage
    def num_stages(self) -> int:
        return self.args.num_iterations

    def stage_name(self) -> str:
        return "iteration"

    def _prepare_stage(self, stage: int) -> bool:
        a = self.args
        iteration = stage + 1
        if self.snapshots_enabled and stage == 0:
            # Written on every fresh start, so a reused output_dir never serves a stale policy.
            self._save_snapshot(INITIAL)
        if self.replay.writes and not self.replay.directory:
            self.replay.directory = self._output_dir(a.preference_replay_dir, "preference_replay")
        params = self.rollouts.sampling_params(self.generation_kwargs)
        comparator = self._open_comparator(iteration)
        # Under several processes each rank samples its share of the items; every rank then
        # holds all the pairs (in item order) and selects the same training pairs.
        items = self.rank_share(list(self.get_train_dataloader()))
        try:
            pairs, seen = self._iteration_pairs(items, comparator, params, iteration)
        finally:
            comparator.close()
            del comparator
        pairs, seen = self._gather_iteration(pairs, seen)
        self._replay_add(iteration, pairs)
        selected = self.replay.select(pairs)
        self._log_iteration(iteration, pairs, selected, seen)
        if not selected:
            self._warn_no_pairs()
        self._train_on_selected(selected)
        return True

    # ------------------------------------------------------------------ several processes
    def _save_snapshot(self, name: str) -> None:
        """Rank 0 saves the policy snapshot; every rank waits until it is on disk."""
        if self.is_main_process:
            save_policy(self.policy_dir, name, self.agents, self.tokenizers)
        barrier(self.dist)

    def _gather_iteration(self, pairs, seen):
        """Every rank's pairs (rank order = item order), the rewards seen for the drift
        logger, and the comparator call count (so checkpoints agree across ranks)."""
        if not self.dist.is_distributed:
            return pairs, seen
        parts = all_gather_objects((pairs, seen, self.comparator_calls), self.dist)
        merged = [p for part, _, _ in parts for p in part]
        seen = {key: [r for _, s, _ in parts for r in s[key]] for key in seen}
        self.comparator_calls = max(calls for _, _, calls in parts)
        return merged, seen

    def _replay_add(self, iteration: int, pairs) -> None:
        """Register the iteration's pairs; rank 0 writes the replay shard and every rank reads
        its description (the shard files must be on a file system all ranks see)."""
        if not self.dist.is_distributed:
            self.replay.add(iteration, pairs)
            return
        if self.is_main_process:
            self.replay.add(iteration, pairs)
        state = broadcast_object(self.replay.state_dict(), self.dist)
        if not self.is_main_process:
            self.replay.load_state_dict(state)

    def _log_iteration(self, iteration, pairs, selected, seen) -> None:
        metrics = {
            "iter/current_iteration": float(iteration),
            "iter/current_preference_pairs": float(len(pairs)),
            "iter/total_preference_pairs": float(self.replay.total_pairs),
            "iter/train_preference_pairs": float(len(selected)),
        }
        # Counters of this rank's own calls: totals over ranks (the log averages over ranks).
        total = functools.partial(all_reduce_sum, ctx=self.dist)
        if self._splitter is not None or self.collaboration is not None:
            metrics["iter/comparator_parse_failures"] = total(self._joint_builder.parse_failures)
        if self.api_client is not None:
            metrics["iter/api_requests"] = total(self.api_client.requests_sent)
            metrics["iter/api_retries"] = total(self.api_client.retries)
        if self.reward_histogram is not None:
            chosen = {
                "target": [
                    p.target_raw_reward for p in selected if p.target_raw_reward is not None
                ],
                "comparator": [
                    p.comparator_raw_reward for p in selected if p.comparator_raw_reward is not None
                ],
            }
            record = drift.iteration_record(
                self.reward_histogram, iteration, seen, chosen, len(selected)
            )
            if self.is_main_process:
                drift.write_iteration(self.reward_distribution_dir, record)
            metrics.update(drift.summary_metrics(record))
            sink = self.reporting.ensure_logger().wandb
            if sink is not None:
                import wandb

                step = max(self.env_step, self.logger.last_step)
                sink.write(drift.wandb_plots(record, wandb.Html), step)
        self.reporting.log_record(metrics)

    def _finish_stage(self, stage: int) -> None:
        if self.snapshots_enabled:
            self._save_snapshot(snapshot_name(stage + 1))

    # ------------------------------------------------------------------ resumable state
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["iteration_pairs"] = [p.to_record() for p in self.iteration_pairs]
        state["comparator_calls"] = self.comparator_calls
        state["replay"] = self.replay.state_dict()
        state["replay_directory"] = self.replay.directory
        if self._splitter is not None:
            state["comparator_parse_failures"] = self._splitter.parse_failures
            state["comparator_parsed"] = self._splitter.parsed
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.iteration_pairs = [PreferencePair.from_record(r) for r in state["iteration_pairs"]]
        self.comparator_calls = int(state["comparator_calls"])
        self.replay.load_state_dict(state["replay"])
        self.replay.directory = state["replay_directory"]
        if self._splitter is not None:
            self._splitter.parse_failures = int(state.get("comparator_parse_failures", 0))
            self._splitter.parsed = int(state.get("comparator_parsed", 0))


class MADPOIterTrainer(IterativeMixin, MADPOTrainer):
    """Iterative (online) MADPO: every iteration samples target and comparator candidates,
    selects pairs (with replay), and runs ``num_train_epochs`` DPO epochs on them.

    With ``reference_free=False`` the reference of an iteration is the policy at its start (or
    ``reference_model_name``); reference log-probs are computed once per iteration.
    """

    algorithm_name = "MADPOIter"
    default_config_cls = MADPOIterConfig
    checkpoint_kind = "madpo_iter"

    def setup(self, inputs) -> None:
        """MADPO's set-up, then the comparators, replay and drift logging."""
        super().setup(inputs)
        self._init_iterative()

    def _train_on_selected(self, selected: list[PreferencePair]) -> None:
        if not self.args.reference_free:
            for pair in selected:
                pair.reference_logps = None
            self.attach_reference_logps_sharded(selected)
        self.iteration_pairs = list(selected)

    def _stage_units(self, stage: int):
        units = []
        for epoch in range(self.args.num_train_epochs):
            key = stage * 100_003 + epoch
            units += [("dpo", b) for b in self.dpo_units(self.iteration_pairs, key)]
        return units

    def collect(self, unit) -> list[PreferencePair]:
        """This rank's share of the unit's pairs of the current iteration."""
        return self.rank_share([self.iteration_pairs[i] for i in unit[1]])


class MARLHFIterTrainer(IterativeMixin, MARLHFTrainer):
    """Iterative (online) MARLHF: every iteration samples target and comparator candidates,
    selects pairs (with replay), trains the reward model on them (restarting from its initial
    weights unless ``reward_model_warm_start``), and runs ``num_train_epochs`` RL epochs.

    The RL trainer (its optimizers and any critics) persists across iterations.
    """

    algorithm_name = "MARLHFIter"
    default_config_cls = MARLHFIterConfig
    run_config_keys = IterativeMixin.run_config_keys + ("rl_algorithm",)
    checkpoint_kind = "marlhf_iter"

    def setup(self, inputs) -> None:
        """MARLHF's set-up, then the comparators, replay and drift logging."""
        super().setup(inputs)
        self._init_iterative()

    def _init_iterative(self) -> None:
        super()._init_iterative()
        self._rm_initial_state = None
        if not self.args.reward_model_warm_start:
            self._rm_initial_state = {
                k: v.detach().to("cpu", copy=True)
                for k, v in self.reward_model.state_dict().items()
            }

    def _pair_scores(self, texts, actor_prompts, items):
        a = self.args
        if a.preference_scoring_reward != "reward_model" or not self.reward_model_trained:
            return super()._pair_scores(texts, actor_prompts, items)
        raw = None
        if self.reward_histogram is not None:
            raw, _ = self.score_joint(texts, actor_prompts[0], items)
        scores = []
        for j in range(len(items)):
            k = len(texts[0][j])
            prompts = [[actor_prompts[i][j]] * k for i in range(self.num_agents)]
            comps = [list(texts[i][j]) for i in range(self.num_agents)]
            scores.append(self.reward_model_scores(prompts, comps))
        return raw, scores, None

    def _train_on_selected(self, selected: list[PreferencePair]) -> None:
        if self._rm_initial_state is not None:
            self.reward_model.load_state_dict(self._rm_initial_state)
            self.reward_optimizer = self._new_reward_optimizer()
        self.num_preference_pairs = len(selected)
        if selected:
            self.fit_reward_model(selected)

    def _stage_units(self, stage: int):
        if not self.num_preference_pairs or not self.reward_model_trained:
            return []
        units = []
        for _ in range(self.args.num_train_epochs):
            units += self.rl_units()
        return units


__all__ = ["IterativeMixin", "MADPOIterTrainer", "MARLHFIterTrainer"]
