"""One online iteration of the iterative trainers, from sampling to the training pairs.

:class:`OnlineIterations` is the ``online`` collaborator of MADPOIter and MARLHFIter. Per
iteration (a stage of the core loop) it opens the comparator, samples target and comparator
candidates on this rank's share of the items, gathers the pairs from every rank, registers them
with the replay store, which returns the training pairs, and logs the iteration (with the reward
distribution when asked). It also writes the policy snapshots that the history comparator (or
``policy_checkpoint_dir``) needs.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from comlrl.core.distributed import (
    all_gather_objects,
    all_reduce_sum,
    barrier,
    broadcast_object,
)
from comlrl.core.logging.reporting import open_run_log
from comlrl.core.rewards.ranges import get_reward_range
from comlrl.core.rollout import rollouts
from comlrl.pbrl import drift
from comlrl.pbrl.api import ApiClient, ApiSettings
from comlrl.pbrl.candidates import rank_share
from comlrl.pbrl.comparator_pairs import ComparatorPairing
from comlrl.pbrl.pairs import PreferencePair
from comlrl.pbrl.replay import ReplayStore
from comlrl.pbrl.snapshots import INITIAL, policy_dir, run_subdir, save_policy, snapshot_name

if TYPE_CHECKING:
    from comlrl.core.distributed import DistributedContext
    from comlrl.pbrl.base import PreferenceTrainerBase


def check_iterative_inputs(trainer: Any, inputs: Any):
    """The iterative trainers' checks before any model is loaded (the reward range for drift
    logs, comparator entries and indices); returns the API client of an ``api`` comparator
    (None otherwise). A config of the wrong class is left to the preference base's check."""
    args = inputs.args if inputs.args is not None else trainer.default_config_cls()
    if not isinstance(args, trainer.default_config_cls):
        return None
    agents, agent_model, num_agents = inputs.agents, inputs.agent_model, inputs.num_agents
    if args.log_reward_distribution and inputs.reward_func is not None:
        if get_reward_range(inputs.reward_func) is None:
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
    if args.comparator_policy == "api":
        return ApiClient(ApiSettings.from_config(args))
    return None


class OnlineIterations:
    """Comparators, replay, drift logs and snapshots of one iterative trainer.

    It keeps no trainer: the constructor and each iteration step take the iterative trainer
    they read.

    Args:
        trainer: the iterative trainer being built.
        api_client: the client of an ``api`` comparator (None otherwise).
        pair_scores: how the trainer scores candidates for pairing (see
            :class:`~comlrl.pbrl.comparator_pairs.ComparatorPairing`).
    """

    def __init__(self, trainer: PreferenceTrainerBase, api_client: Any, pair_scores):
        t = trainer
        a = t.args
        seed = a.seed if a.seed is not None else 0
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
        self.comparators = ComparatorPairing(t, api_client, pair_scores)
        # The current iteration's training pairs.
        self.pairs: list[PreferencePair] = []
        self.reward_histogram = None
        if a.log_reward_distribution:
            low, high = t.reward_range
            self.reward_histogram = drift.RewardHistogram(low, high)

    @property
    def api_client(self):
        """The HTTP client of an ``api`` comparator (None otherwise)."""
        return self.comparators.api_client

    def selected_pairs(self, t: PreferenceTrainerBase, stage: int) -> list[PreferencePair]:
        """Run the sampling half of iteration ``stage`` (0-based) and return its training pairs
        (identical on every rank)."""
        a = t.args
        iteration = stage + 1
        if self.snapshots_enabled and stage == 0:
            # Written on every fresh start, so a reused output_dir never serves a stale policy.
            self.save_snapshot(t, INITIAL)
        if self.replay.writes and not self.replay.directory:
            self.replay.directory = run_subdir(t, a.preference_replay_dir, "preference_replay")
        params = rollouts.sampling_params(t, t.generation_kwargs)
        comparator = self.comparators.open(t, iteration)
        # Under several processes each rank samples its share of the items; every rank then
        # holds all the pairs (in item order) and selects the same training pairs.
        items = rank_share(list(t.get_train_dataloader()), t.dist)
        try:
            pairs, seen = self.comparators.iteration_pairs(t, items, comparator, params, iteration)
        finally:
            comparator.close()
            del comparator
        pairs, seen = self._gather(t.dist, pairs, seen)
        self._replay_add(t, iteration, pairs)
        selected = self.replay.select(pairs)
        self._log(t, iteration, pairs, selected, seen)
        if not selected:
            t.warn_no_pairs()
        return selected

    def end_iteration(self, t: PreferenceTrainerBase, stage: int) -> None:
        """Save the policy after iteration ``stage`` (0-based) when snapshots are kept."""
        if self.snapshots_enabled:
            self.save_snapshot(t, snapshot_name(stage + 1))

    # ------------------------------------------------------------------ several processes
    def save_snapshot(self, t: PreferenceTrainerBase, name: str) -> None:
        """Rank 0 saves the policy snapshot; every rank waits until it is on disk."""
        if t.dist.is_main:
            save_policy(policy_dir(t), name, t.agents, t.tokenizers)
        barrier(t.dist)

    def _gather(self, dist: DistributedContext, pairs, seen):
        """Every rank's pairs (rank order = item order), the rewards seen for the drift
        logger, and the comparator call count (so checkpoints agree across ranks)."""
        if not dist.is_distributed:
            return pairs, seen
        parts = all_gather_objects((pairs, seen, self.comparators.calls), dist)
        merged = [p for part, _, _ in parts for p in part]
        seen = {key: [r for _, s, _ in parts for r in s[key]] for key in seen}
        self.comparators.calls = max(calls for _, _, calls in parts)
        return merged, seen

    def _replay_add(self, t: PreferenceTrainerBase, iteration: int, pairs) -> None:
        """Register the iteration's pairs; rank 0 writes the replay shard and every rank reads
        its description (the shard files must be on a file system all ranks see)."""
        if not t.dist.is_distributed:
            self.replay.add(iteration, pairs)
            return
        if t.dist.is_main:
            self.replay.add(iteration, pairs)
        state = broadcast_object(self.replay.state_dict(), t.dist)
        if not t.dist.is_main:
            self.replay.load_state_dict(state)

    def _log(self, t: PreferenceTrainerBase, iteration, pairs, selected, seen) -> None:
        metrics = {
            "iter/current_iteration": float(iteration),
            "iter/current_preference_pairs": float(len(pairs)),
            "iter/total_preference_pairs": float(self.replay.total_pairs),
            "iter/train_preference_pairs": float(len(selected)),
        }
        # Counters of this rank's own calls: totals over ranks (the log averages over ranks).
        total = functools.partial(all_reduce_sum, ctx=t.dist)
        comparators = self.comparators
        if comparators.splitter is not None or t.collaboration is not None:
            metrics["iter/comparator_parse_failures"] = total(
                comparators.joint_builder.parse_failures
            )
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
            if t.dist.is_main:
                drift.write_iteration(run_subdir(t, None, "reward_distributions"), record)
            metrics.update(drift.summary_metrics(record))
            logger = open_run_log(t)
            logger.log_html(
                drift.html_plots(record), max(t.run_state.environment_steps, logger.last_step)
            )
        t.reporting.log_record(metrics)

    # ------------------------------------------------------------------ resumable state
    def state_dict(self) -> dict[str, Any]:
        """The iteration's training pairs, comparator calls, the replay store and the
        comparator's parse counts, under the keys of the trainer's family state."""
        comparators = self.comparators
        state = {
            "iteration_pairs": [p.to_record() for p in self.pairs],
            "comparator_calls": comparators.calls,
            "replay": self.replay.state_dict(),
            "replay_directory": self.replay.directory,
        }
        if comparators.splitter is not None:
            state["comparator_parse_failures"] = comparators.splitter.parse_failures
            state["comparator_parsed"] = comparators.splitter.parsed
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict` (reads the trainer's family state)."""
        comparators = self.comparators
        self.pairs = [PreferencePair.from_record(r) for r in state["iteration_pairs"]]
        comparators.calls = int(state["comparator_calls"])
        self.replay.load_state_dict(state["replay"])
        self.replay.directory = state["replay_directory"]
        if comparators.splitter is not None:
            comparators.splitter.parse_failures = int(state.get("comparator_parse_failures", 0))
            comparators.splitter.parsed = int(state.get("comparator_parsed", 0))
