"""What a trainer reports: the run directory, the metric logger and its sinks, the logging
cadence of training records, metric reduction over ranks, sampled completions and progress
bars.

:class:`Reporting` is the trainer's ``reporting`` collaborator. It is built with what it reads:
the config, the process context, the run state, the phase timer and the family's labels. What
the trainer may still change or only knows later (the run description and ``wandb_config`` when
the log opens, the stage count and ``verbose`` for a progress bar, how per-turn metrics are
taken) comes in as arguments from the loop.
"""

from __future__ import annotations

import os
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from comlrl.core.distributed import reduce_metrics
from comlrl.core.logging import MetricLogger
from comlrl.core.logging.completions import spread
from comlrl.core.loop.run_state import RunState
from comlrl.core.loop.step_cadence import step_count
from comlrl.core.rewards.reward_metrics import record_reward_metrics, turn_metrics

if TYPE_CHECKING:
    from comlrl.core.loop.timing import PhaseTimer
    from comlrl.core.trainer import TrainerBase


def mean_over_ranks(metrics: dict[str, Any], dist: Any, step: int) -> dict[str, float]:
    """``metrics`` averaged over the ranks of ``dist``; every rank must pass the same keys (a
    RuntimeError naming them, at ``step``, otherwise)."""
    keys = sorted(metrics)
    # A checksum of the key set rides along, so ranks logging different keys fail loudly
    # instead of averaging unrelated numbers.
    tag = float(zlib.crc32("\n".join(keys).encode()))
    reduced = reduce_metrics({**metrics, "\x00keys": tag}, dist)
    if reduced.pop("\x00keys") != tag:
        raise RuntimeError(
            f"Ranks logged different metric keys at env step {step} (rank "
            f"{dist.rank}: {keys}); every rank must log the same metrics."
        )
    return reduced


class Reporting:
    """Logging for every family: one cadence, one logger, one progress bar.

    Args:
        args: the run's config (this rank's share; reads ``output_dir``, ``report_to``,
            ``steps_unit``, ``logging_steps`` and ``log_completions``).
        dist: the process context (only rank 0 writes; metrics are averaged over ranks).
        state: the run state whose env step records are logged at and whose marks it keeps.
        timing: the phase timer whose ``timing/<phase>`` seconds ride on training records.
        algorithm: the family's name (progress bars, the announcement, the default run dir).
        progress_unit: what the progress bar counts.
        progress_metric: the name the bar shows the latest training reward under.
        idle_throughput: whether ``throughput/tokens_per_s`` counts time outside the phases.

    ``record_extras`` are callables whose dicts are merged into every logged record before it
    is reduced over ranks (e.g. a family's running parse-failure counts); ``diagnostics``
    (the rollout backend's ``drain_metrics``, where it has one) rides on training records.
    """

    def __init__(
        self,
        args: Any,
        dist: Any,
        state: RunState,
        timing: PhaseTimer,
        *,
        algorithm: str,
        progress_unit: str = "item",
        progress_metric: str = "reward",
        idle_throughput: bool = False,
    ):
        self.args, self.dist, self.state, self.timing = args, dist, state, timing
        self.algorithm, self.progress_unit = algorithm, progress_unit
        self.progress_metric, self.idle_throughput = progress_metric, idle_throughput
        self.logger: MetricLogger | None = None
        self.run_dir: str | None = None
        # The mean training reward of the latest collected batch (the progress bar shows it).
        self.last_reward_mean: float | None = None
        self.record_extras: list[Callable[[], dict[str, Any]]] = []
        self.diagnostics: Callable[[], dict[str, float]] | None = None
        self._pending_completions: list[dict[str, Any]] | None = None
        self._announced = False

    # ----------------------------------------------------------------- the logger
    def _default_run_dir(self, wandb_config: dict | None) -> str:
        out = self.args.output_dir
        if out:
            return str(out)
        if wandb_config and wandb_config.get("dir"):
            return os.path.join(wandb_config["dir"], "comlrl")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return os.path.join("runs", f"{self.algorithm.lower()}-{stamp}-{os.getpid()}")

    def open(
        self, run_config: dict[str, Any] | None = None, wandb_config: dict | None = None
    ) -> MetricLogger:
        """The run's metric logger, built on the first call with ``run_config`` (the run's
        description for the sinks that keep one, such as W&B's run config) and ``wandb_config``
        (the W&B options, 1.4.3's ``wandb_config``; its ``dir`` also places the default run
        directory). Later calls return the same logger and ignore both; use
        :func:`open_run_log` where the trainer is at hand."""
        if self.logger is None:
            self.run_dir = self._default_run_dir(wandb_config)
            self.logger = MetricLogger(
                self.run_dir,
                wandb_config=wandb_config,
                run_config=dict(run_config or {}),
                # The W&B run is named after its run directory unless wandb_config names it.
                default_name=os.path.basename(os.path.normpath(self.run_dir)),
                enabled=self.dist.is_main,
                report_to=self.args.report_to,
            )
        return self.logger

    def ensure_logger(self) -> MetricLogger:
        """The run's metric logger (opened without a run description or W&B options when
        nothing opened it yet: the loop and evaluation open it first, see
        :func:`open_run_log`)."""
        return self.logger if self.logger is not None else self.open()

    def announce_destinations(self, verbose: bool = True) -> None:
        """Print where the run's metrics go (``metrics.jsonl`` and each sink ``report_to``
        chose), once per trainer, as the first line of its first ``train()`` call; silent on
        ranks other than 0 and when the trainer is not ``verbose``."""
        logger = self.ensure_logger()
        if self._announced or not self.dist.is_main or not verbose:
            return
        self._announced = True
        from tqdm.auto import tqdm

        chosen = self.args.report_to
        where = "; ".join(logger.destinations())
        tqdm.write(f"{self.algorithm}: metrics go to {where} (report_to={chosen!r})", sys.stdout)

    # ----------------------------------------------------------------- records
    def note_saved_model(self, output_dir: Any) -> None:
        """Tell the sinks with a run of their own where the final models were saved
        (``final_model_saved``, as 1.4.3 logged to W&B); nothing before a logger exists."""
        if self.logger is not None:
            self.logger.note({"final_model_saved": str(output_dir)}, self.state.environment_steps)

    def log_metrics(
        self, metrics: dict[str, Any], step: int | None = None, *, reduce: bool = True
    ) -> None:
        """Log at ``step`` (default: the current env step), with the ``record_extras``.

        In multi-process training every rank must call this at the same points with the same
        keys: the values are averaged over ranks (``reduce=False``: log this rank's values as
        they are, which evaluation on rank 0 does) and only rank 0 writes them.
        """
        if self.record_extras:
            metrics = dict(metrics)
            for extra in self.record_extras:
                metrics.update(extra())
        if reduce and self.dist.is_distributed:
            metrics = self.reduced(metrics)
        self.ensure_logger().log(metrics, self.state.environment_steps if step is None else step)

    def take_timings(self) -> dict[str, float]:
        """``timing/<phase>`` seconds and ``throughput/tokens_per_s`` since the previous
        training record; resets them."""
        return self.timing.drain(idle_throughput=self.idle_throughput)

    def log_due(self, step: int) -> bool:
        """The logging cadence of training records: the first one, then whenever the count of
        ``steps_unit`` is at least ``logging_steps`` past the last logged one (every record
        when it is <= 1). ``step`` is the record's env step, the count under
        ``steps_unit='env'``. Marks the count as logged when it is due."""
        a, state = self.args, self.state
        if a.steps_unit == "optimizer":
            step = step_count(a.steps_unit, state)
        every, last = a.logging_steps, state.log_mark
        if every <= 1 or last < 0 or step - last >= every:
            state.log_mark = step
            return True
        return False

    def log_record(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Log a training record with the timings since the previous one (no cadence: for
        records of work that happens once, such as sampling a stage's preference data)."""
        diagnostics = self.diagnostics() if self.diagnostics is not None else {}
        self.log_metrics({**metrics, **self.take_timings(), **diagnostics}, step)

    def with_record_metrics(
        self, samples: Any, metrics: dict[str, float], over: str | None
    ) -> dict[str, float]:
        """An update's ``metrics`` with, where the update's samples are a rollout record, its
        rewards, returns and KL per turn (taken ``over`` what the family says,
        :func:`~comlrl.core.rewards.reward_metrics.turn_metrics`) and each agent's own reward
        per turn (:func:`~comlrl.core.rewards.reward_metrics.record_reward_metrics`)."""
        per_turn = turn_metrics(samples, over, self.args)
        return {**per_turn, **metrics, **record_reward_metrics(samples)}

    def log_training(self, metrics: dict[str, float] | None, step: int) -> bool:
        """Log an update's ``metrics`` (None: the update was skipped) with the timings when the
        cadence says so, and the completions offered since the previous record."""
        if metrics is None or not self.log_due(step):
            return False
        self.log_record(metrics, step)
        self.write_completions(step)
        return True

    def reduced(self, metrics: dict[str, Any]) -> dict[str, float]:
        """``metrics`` averaged over ranks; ranks that log different keys fail loudly."""
        return mean_over_ranks(metrics, self.dist, self.state.environment_steps)

    # ----------------------------------------------------------------- completions
    @property
    def completion_rows_per_log(self) -> int:
        """How many rows each training log record gets (0: completions are not logged)."""
        return self.args.log_completions

    def offer_completions(self, make_rows: Callable[[], Sequence[dict[str, Any]]]) -> None:
        """Offer the rows of a collected batch (see :mod:`comlrl.core.logging.completions`);
        the latest offer is written at the next training log record. ``make_rows`` runs only
        when completions are logged on this process, so a run that does not log them pays
        nothing."""
        count = self.completion_rows_per_log
        if count <= 0 or not self.dist.is_main:
            return
        self._pending_completions = spread(list(make_rows()), count)

    def write_completions(self, step: int) -> None:
        """Write the offered rows next to the training record just logged at ``step``."""
        rows, self._pending_completions = self._pending_completions, None
        if rows and self.logger is not None:
            self.logger.log_completions(rows, step)

    # ----------------------------------------------------------------- progress bars
    def progress_bar(
        self, total: int, stage: int, stages: int, stage_label: str = "epoch", verbose: bool = True
    ):
        """The progress bar of ``stage`` of ``stages``, labelled "<algorithm> <stage_label>
        i/n" (silent on ranks other than 0 and when the trainer is not ``verbose``)."""
        from tqdm.auto import tqdm

        return tqdm(
            total=total,
            desc=f"{self.algorithm} {stage_label} {stage + 1}/{stages}",
            unit=self.progress_unit,
            disable=not verbose or not self.dist.is_main,
            dynamic_ncols=True,
        )

    def update_progress(self, bar) -> None:
        """Show the latest training reward on the bar, under the family's ``progress_metric``."""
        if self.last_reward_mean is not None:
            step = self.state.environment_steps
            postfix = {self.progress_metric: f"{self.last_reward_mean:.3f}", "env_step": step}
            bar.set_postfix(postfix, refresh=False)


def open_run_log(trainer: TrainerBase) -> MetricLogger:
    """Open ``trainer``'s metric logger with its ``run_config()`` and its ``wandb_config`` as
    they are now (a script may set ``wandb_config`` after building the trainer, as 1.4.3
    scripts do); the same logger once it is open."""
    return trainer.reporting.open(trainer.run_config(), trainer.wandb_config)
