"""The trainer's ``monitors`` collaborator: measures, watches, stops and summarizes.

Core feeds it at three points, so no family writes monitor code:

- :func:`comlrl.core.training.train_step.train_step` asks :meth:`Monitors.watched_step` for a meter
  when a step trains one agent's policy on sampled completions of one turn (its
  :class:`~comlrl.core.training.train_step.Target` names the ``turn``); the log-prob engine hands that
  meter the token entropies of the step's forwards, and the step's ``clip_fraction`` and ``kl``
  part metrics are tallied with them;
- the loop's update (:func:`comlrl.core.loop.flush`) calls :meth:`Monitors.after_update` with
  the experience it trained on: the record-derived values are computed, joined with the steps'
  tallies, averaged over ranks, the derived monitors (KL acceleration, length drift) added, and
  all of it watched and returned with the update's metrics, so the training record carries it to
  every sink;
- evaluation (:func:`comlrl.core.loop.evaluation.evaluate`) calls :meth:`Monitors.after_eval`, which
  adds the train/eval gap to the eval record.

At the end of a run (:meth:`Monitors.summarize`) one log line and ``<run dir>/monitors.json``
say what every monitor did.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from comlrl.core.monitors.config import MonitorsConfig, check_monitors
from comlrl.core.monitors.metrics import (
    EntropyMeter,
    StepTally,
    key,
    parse_monitor_key,
    record_values,
    train_rewards,
)
from comlrl.core.monitors.watcher import Watcher, where

if TYPE_CHECKING:
    from comlrl.core.distributed import DistributedContext
    from comlrl.core.logging.reporting import Reporting
    from comlrl.core.loop.run_state import RunState

_log = logging.getLogger("comlrl.monitors")
SUMMARY_FILE = "monitors.json"


def summary_line(record: Mapping[str, Any]) -> str:
    """One line on a run's monitors summary (what :meth:`Monitors.summarize` writes)."""
    monitors = record["monitors"]
    crossed = [k for k in record["crossed"] if k in monitors]
    if not crossed:
        watched = sum(1 for s in monitors.values() if s["threshold"] is not None)
        return (
            f"monitors ({record['ended']}): none of {watched} watched series crossed its threshold."
        )
    listing = "; ".join(
        f"{monitors[k]['monitor']} ({where(k)}) at step {monitors[k]['crossed_at_step']}: "
        f"{monitors[k]['crossed_value']:.4g}"
        for k in crossed
    )
    return f"monitors ({record['ended']}): {len(crossed)} crossed: {listing}."


def read_summary(run_dir: str) -> dict[str, Any] | None:
    """The monitors summary a run wrote into ``run_dir``, or None."""
    path = os.path.join(run_dir, SUMMARY_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


class StepWatch(EntropyMeter):
    """The meter of one watched optimizer step: its agent, turn and the tally it adds to."""

    def __init__(self, tally: StepTally):
        super().__init__()
        self.tally = tally

    def record(self, metrics: Mapping[str, Sequence[float]]) -> None:
        """The step succeeded: add its entropy and its part metrics to the tally."""
        total, tokens = self.totals()
        self.tally.entropy_sum += total
        self.tally.entropy_tokens += tokens
        self.tally.add_step(metrics)


class Monitors:
    """The reward-hacking monitors of one trainer (see the module docs)."""

    def __init__(self, args: Any, dist: DistributedContext, state: RunState, reporting: Reporting):
        # The config is read at each use (``args.monitors``): a later ``train()`` call may
        # bring other thresholds. ``reporting`` says where the run directory is.
        self.args = args
        self.dist = dist
        self.state = state
        self.reporting = reporting
        self._watcher: Watcher | None = None
        self._tallies: dict[tuple[int, int], StepTally] = {}
        # The first `window` mean lengths of every key: the length drift's baseline.
        self.length_baselines: dict[str, list[float]] = {}
        # The newest training reward per turn (0-based), for the train/eval gap.
        self.train_reward: dict[int, float] = {}

    @property
    def config(self) -> MonitorsConfig:
        """The config's ``monitors`` section (the defaults for a config without one)."""
        value = self.args.monitors
        return value if isinstance(value, MonitorsConfig) else check_monitors("monitors", value)

    @property
    def watcher(self) -> Watcher:
        """The threshold watcher, judging by the config as it is now (a second ``train()``
        call may bring other thresholds)."""
        if self._watcher is None:
            self._watcher = Watcher(self.config)
        else:
            self._watcher.config = self.config
        return self._watcher

    @property
    def enabled(self) -> bool:
        """Whether anything is measured."""
        return self.config.enabled

    # ------------------------------------------------------------------ measuring
    def watched_step(self, targets: Sequence[Any]) -> StepWatch | None:
        """A meter for an optimizer step over ``targets`` when it is watched: monitors on and
        one target, an agent's policy, labelled with the turn of its samples."""
        if not self.enabled or len(targets) != 1:
            return None
        target = targets[0]
        agent, turn = getattr(target, "agent", None), getattr(target, "turn", None)
        if agent is None or turn is None:
            return None
        return StepWatch(self._tallies.setdefault((int(agent), int(turn)), StepTally()))

    def _kl_coef(self) -> float:
        a = self.args
        return float(a.reference_kl_coef) if getattr(a, "reference_kl_enabled", False) else 0.0

    def after_update(
        self, samples: Sequence[Sequence[Any]] | None, metrics: dict[str, float] | None, step: int
    ) -> dict[str, float] | None:
        """The update's metrics with every monitor value of the update added (see the module
        docs); ``samples[agent]`` is the experience it trained on (None: a family without a
        rollout record). Every rank calls it at the same point."""
        tallies, self._tallies = self._tallies, {}
        if not self.enabled:
            return metrics
        values = record_values(samples, self._kl_coef()) if samples else {}
        for (agent, turn), tally in sorted(tallies.items()):
            for name, value in tally.values(agent, turn).items():
                # A KL the reward shaping measured is kept over a loss term's.
                values.setdefault(name, value)
        rewards = train_rewards(samples) if samples else {}
        if self.dist.is_distributed:
            from comlrl.core.logging.reporting import mean_over_ranks

            # Watched as one: every rank sees the same values, so they agree on crossings.
            reduced = mean_over_ranks(
                {**values, **{f"\x00reward/{t}": r for t, r in rewards.items()}},
                self.dist,
                step,
            )
            rewards = {int(k.split("/")[1]): v for k, v in reduced.items() if k[0] == "\x00"}
            values = {k: v for k, v in reduced.items() if k[0] != "\x00"}
        self.train_reward.update(rewards)
        values.update(self._derived(values))
        self.watcher.observe(values, step)
        if metrics is None:
            return values or None
        return {**metrics, **values}

    def _derived(self, values: Mapping[str, float]) -> dict[str, float]:
        """KL acceleration (the mean second difference of the KL over the last ``window``
        updates) and length drift (the mean length relative to the mean of the first
        ``window`` updates, minus 1) of every key that has their inputs."""
        window = self.config.window
        out: dict[str, float] = {}
        for metric, value in values.items():
            agent, turn, name = parse_monitor_key(metric)
            if name == "kl":
                earlier = self.watcher.series.get(metric)
                series = [*(earlier.recent if earlier else []), value][-(window + 2) :]
                if len(series) >= 3:
                    second = np.diff(series, n=2)
                    out[key(agent, turn, "kl_acceleration")] = float(np.mean(second))
            elif name == "completion_length":
                base = self.length_baselines.setdefault(metric, [])
                if len(base) < window:
                    base.append(float(value))
                if len(base) == window:
                    mean = float(np.mean(base))
                    if mean > 0:
                        out[key(agent, turn, "length_drift")] = value / mean - 1.0
        return out

    def after_eval(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """The train/eval gap of each turn that has both rewards: the newest update's mean
        training reward minus this evaluation's (``eval/turn_<t>/reward_mean``); watched, and
        returned for the eval record (evaluation runs on the main process only)."""
        if not self.enabled:
            return {}
        gaps = {}
        for turn, train in sorted(self.train_reward.items()):
            evaluated = metrics.get(f"eval/turn_{turn + 1}/reward_mean")
            if evaluated is not None and math.isfinite(evaluated):
                gaps[key(None, turn, "train_eval_gap")] = float(train - evaluated)
        self.watcher.observe(gaps, self.state.environment_steps)
        return gaps

    # ------------------------------------------------------------------ stopping
    def stop_requested(self) -> str | None:
        """The message of the crossing that asks the run to stop (``stop_on``), or None. Under
        several processes every rank calls it at the same point and they agree (a train/eval
        gap is only measured where evaluation runs)."""
        if not self.config.stop_on:
            return None
        stop = self.watcher.stop
        dist = self.dist
        if dist.is_distributed:
            from comlrl.core.distributed import reduce_metrics

            any_rank = reduce_metrics({"stop": 1.0 if stop else 0.0}, dist)["stop"] > 0
            if any_rank and stop is None:
                return "a monitor in monitors.stop_on crossed its threshold on another rank."
        return stop[1] if stop else None

    # ------------------------------------------------------------------ summary
    def summarize(self, reason: str) -> dict[str, Any] | None:
        """Log one line on what every watched monitor did and write ``monitors.json`` into the
        run directory (main process only); ``reason`` says how the run ended."""
        if not self.enabled or not self.dist.is_main:
            return None
        summary = self.watcher.summary()
        crossed = {k: s for k, s in summary.items() if s["crossed_at_step"] is not None}
        record = {
            "ended": reason,
            "stop": self.state.stopped_by_monitor,
            "config": self.config.to_dict(),
            "crossed": sorted(crossed),
            "monitors": summary,
        }
        run_dir = self.reporting.run_dir
        if run_dir:
            os.makedirs(run_dir, exist_ok=True)
            path = os.path.join(run_dir, SUMMARY_FILE)
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(record, fh, indent=2, sort_keys=True)
        line = summary_line(record)
        if crossed:
            _log.warning(line)
        else:
            _log.info(line)
        return record

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Plain data for checkpoints: the watcher's series, the length baselines and the
        newest training rewards."""
        return {
            "watcher": self.watcher.state_dict(),
            "length_baselines": {k: list(v) for k, v in self.length_baselines.items()},
            "train_reward": [[int(t), float(r)] for t, r in sorted(self.train_reward.items())],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        self.watcher.load_state_dict(state.get("watcher", {}))
        self.length_baselines = {
            k: [float(x) for x in v] for k, v in state.get("length_baselines", {}).items()
        }
        self.train_reward = {int(t): float(r) for t, r in state.get("train_reward", [])}
