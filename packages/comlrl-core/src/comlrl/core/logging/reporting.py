"""What a trainer reports: the run directory, the metric logger and its sinks, the logging
cadence of training records, metric reduction over ranks, sampled completions and progress
bars.

:class:`Reporting` is the trainer's ``reporting`` collaborator. It reads from its trainer the
config (``args``, ``global_args``), ``dist``, ``timing``, the run state, ``wandb_config``,
``verbose``, the rollout backend's diagnostics, and what the family declares about its reports:
``algorithm_name``, ``run_config()``, ``stage_label``, ``num_stages()``, ``progress_unit``,
``progress_metric`` and ``timing_idle_throughput``.
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

    ``record_extras`` are callables whose dicts are merged into every logged record before it
    is reduced over ranks (e.g. a family's running parse-failure counts).
    """

    def __init__(self, trainer: TrainerBase):
        self.trainer = trainer
        self.logger: MetricLogger | None = None
        self.run_dir: str | None = None
        # The mean training reward of the latest collected batch (the progress bar shows it).
        self.last_reward_mean: float | None = None
        self.record_extras: list[Callable[[], dict[str, Any]]] = []
        self._pending_completions: list[dict[str, Any]] | None = None
        self._announced = False

    @property
    def state(self) -> RunState:
        """The run state whose env step records are logged at and whose marks it keeps."""
        return self.trainer.run_state

    # ----------------------------------------------------------------- the logger
    def _default_run_dir(self) -> str:
        t = self.trainer
        out = t.args.output_dir
        if out:
            return str(out)
        if t.wandb_config and t.wandb_config.get("dir"):
            return os.path.join(t.wandb_config["dir"], "comlrl")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return os.path.join("runs", f"{t.algorithm_name.lower()}-{stamp}-{os.getpid()}")

    def ensure_logger(self) -> MetricLogger:
        """The run's metric logger, built on first use."""
        if self.logger is None:
            t = self.trainer
            self.run_dir = self._default_run_dir()
            self.logger = MetricLogger(
                self.run_dir,
                wandb_config=t.wandb_config,
                run_config=t.run_config(),
                # The W&B run is named after its run directory unless wandb_config names it.
                default_name=os.path.basename(os.path.normpath(self.run_dir)),
                enabled=t.dist.is_main,
                report_to=t.args.report_to,
            )
        return self.logger

    def announce_destinations(self) -> None:
        """Print where the run's metrics go (``metrics.jsonl`` and each sink ``report_to``
        chose), once per trainer, as the first line of its first ``train()`` call; silent on
        ranks other than 0 and when the trainer is not verbose."""
        t = self.trainer
        logger = self.ensure_logger()
        if self._announced or not t.dist.is_main or not getattr(t, "verbose", True):
            return
        self._announced = True
        from tqdm.auto import tqdm

        chosen = t.args.report_to
        where = "; ".join(logger.destinations())
        tqdm.write(f"{t.algorithm_name}: metrics go to {where} (report_to={chosen!r})", sys.stdout)

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
        t = self.trainer
        if self.record_extras:
            metrics = dict(metrics)
            for extra in self.record_extras:
                metrics.update(extra())
        if reduce and t.dist.is_distributed:
            metrics = self.reduced(metrics)
        self.ensure_logger().log(metrics, self.state.environment_steps if step is None else step)

    def take_timings(self) -> dict[str, float]:
        """``timing/<phase>`` seconds and ``throughput/tokens_per_s`` since the previous
        training record; resets them."""
        t = self.trainer
        return t.timing.drain(idle_throughput=t.timing_idle_throughput)

    def log_due(self, step: int) -> bool:
        """The logging cadence of training records: the first one, then whenever the count of
        ``steps_unit`` is at least ``logging_steps`` past the last logged one (every record
        when it is <= 1). ``step`` is the record's env step, the count under
        ``steps_unit='env'``. Marks the count as logged when it is due."""
        a, state = self.trainer.args, self.state
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
        self.log_metrics({**metrics, **self.take_timings(), **self.backend_metrics()}, step)

    def backend_metrics(self) -> dict[str, float]:
        """The rollout backend's diagnostics since the previous record (e.g. vLLM's
        ``rollout/logprob_abs_diff``); backends without ``drain_metrics`` have none."""
        drain = getattr(getattr(self.trainer, "rollout_backend", None), "drain_metrics", None)
        return drain() if drain is not None else {}

    def log_update(self, samples: Any, metrics: dict[str, float] | None, step: int) -> bool:
        """Log an update's ``metrics`` (None: the update was skipped) together with, where the
        update's samples are a rollout record, its rewards, returns and KL per turn (taken
        over what the trainer's ``turn_metrics_over`` says,
        :func:`~comlrl.core.rewards.reward_metrics.turn_metrics`) and each agent's own reward per turn
        (:func:`~comlrl.core.rewards.reward_metrics.record_reward_metrics`), and the monitors' values
        of the update (:mod:`comlrl.core.monitors`, which also watch them)."""
        if metrics is not None:
            over = getattr(self.trainer, "turn_metrics_over", None)
            per_turn = turn_metrics(samples, over, self.trainer.args)
            metrics = {**per_turn, **metrics, **record_reward_metrics(samples)}
        metrics = self.trainer.monitors.after_update(samples, metrics, step)
        return self.log_training(metrics, step)

    def log_training(self, metrics: dict[str, float] | None, step: int) -> bool:
        """Log an update's ``metrics`` with the timings when the cadence says so."""
        if metrics is None or not self.log_due(step):
            return False
        self.log_record(metrics, step)
        self.write_completions(step)
        return True

    def reduced(self, metrics: dict[str, Any]) -> dict[str, float]:
        """``metrics`` averaged over ranks; ranks that log different keys fail loudly."""
        return mean_over_ranks(metrics, self.trainer.dist, self.state.environment_steps)

    # ----------------------------------------------------------------- completions
    @property
    def completion_rows_per_log(self) -> int:
        """How many rows each training log record gets (0: completions are not logged)."""
        return self.trainer.args.log_completions

    def offer_completions(self, make_rows: Callable[[], Sequence[dict[str, Any]]]) -> None:
        """Offer the rows of a collected batch (see :mod:`comlrl.core.logging.completions`);
        the latest offer is written at the next training log record. ``make_rows`` runs only
        when completions are logged on this process, so a run that does not log them pays
        nothing."""
        count = self.completion_rows_per_log
        if count <= 0 or not self.trainer.dist.is_main:
            return
        self._pending_completions = spread(list(make_rows()), count)

    def write_completions(self, step: int) -> None:
        """Write the offered rows next to the training record just logged at ``step``."""
        rows, self._pending_completions = self._pending_completions, None
        if rows and self.logger is not None:
            self.logger.log_completions(rows, step)

    # ----------------------------------------------------------------- progress bars
    def progress_bar(self, total: int, stage: int):
        """The progress bar of ``stage``, labelled "<algorithm> <stage name> i/n" (silent on
        ranks other than 0 and when the trainer is not verbose)."""
        from tqdm.auto import tqdm

        t = self.trainer
        return tqdm(
            total=total,
            desc=f"{t.algorithm_name} {t.stage_label} {stage + 1}/{t.num_stages()}",
            unit=t.progress_unit,
            disable=not getattr(t, "verbose", True) or not t.dist.is_main,
            dynamic_ncols=True,
        )

    def update_progress(self, bar) -> None:
        """Show the latest training reward on the bar, under the family's ``progress_metric``."""
        if self.last_reward_mean is not None:
            t = self.trainer
            step = self.state.environment_steps
            postfix = {t.progress_metric: f"{self.last_reward_mean:.3f}", "env_step": step}
            bar.set_postfix(postfix, refresh=False)
