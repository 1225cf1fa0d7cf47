"""What a trainer reports: the run directory, the metric logger and its sinks, the logging
cadence of training records, metric reduction over ranks, and progress bars.

:class:`Reporting` is part of :class:`comlrl.core.trainer.TrainerBase`; it reads the trainer's
``args``, ``global_args``, ``dist``, ``timing``, ``env_step``, ``wandb_config`` and
``algorithm_name``.
"""

from __future__ import annotations

import os
import time
import zlib
from typing import Any

from comlrl.core.distributed import reduce_metrics
from comlrl.core.logging import MetricLogger
from comlrl.core.logging.completions import CompletionReporting
from comlrl.core.step_cadence import step_count


class Reporting(CompletionReporting):
    """Logging for every family: one cadence, one logger, one progress bar."""

    # Config fields summarised in the W&B run config, where the config has them (a family
    # extends the tuple with its own).
    run_config_keys: tuple[str, ...] = (
        "num_turns",
        "advantage_mode",
        "advantage_normalization",
        "reference_kl_enabled",
        "reference_kl_coef",
        "reference_devices",
        "agent_learning_rate",
        "num_train_epochs",
        "max_new_tokens",
        "num_generations",
    )
    # Whether every training record carries every timing key (0.0 when nothing was timed).
    timing_idle_throughput = False
    # Eval items whose completions are printed as a console table after each evaluation (0:
    # none; ``comlrl train`` sets it from ``output.console_completions``).
    console_completions = 0
    logger: MetricLogger | None = None
    _last_train_log_step = -1
    _last_reward_mean: float | None = None

    def _run_dir(self) -> str:
        out = self.args.output_dir
        if out:
            return str(out)
        if self.wandb_config and self.wandb_config.get("dir"):
            return os.path.join(self.wandb_config["dir"], "comlrl")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return os.path.join("runs", f"{self.algorithm_name.lower()}-{stamp}-{os.getpid()}")

    def run_config(self) -> dict[str, Any]:
        """The run description logged to W&B: model, agent count, algorithm, and the config
        fields of ``run_config_keys`` that the config has (as written: global batch sizes)."""
        a = self.global_args
        cfg: dict[str, Any] = {
            "model_name": self.model_name,
            "num_agents": self.num_agents,
            "algorithm": self.algorithm_name,
        }
        cfg.update({k: getattr(a, k) for k in self.run_config_keys if hasattr(a, k)})
        return cfg

    def ensure_logger(self) -> MetricLogger:
        """The run's metric logger, built on first use (public: the loop calls it)."""
        return self._ensure_logger()

    def _ensure_logger(self) -> MetricLogger:
        if self.logger is None:
            self.run_dir = self._run_dir()
            self.logger = MetricLogger(
                self.run_dir,
                wandb_config=self.wandb_config,
                run_config=self.run_config(),
                # The W&B run is named after its run directory unless wandb_config names it.
                default_name=os.path.basename(os.path.normpath(self.run_dir)),
                enabled=self.is_main_process,
                report_to=self.args.report_to,
            )
        return self.logger

    def log_metrics(
        self, metrics: dict[str, Any], step: int | None = None, *, reduce: bool = True
    ) -> None:
        """Log at ``step`` (default: the current env step).

        In multi-process training every rank must call this at the same points with the same
        keys: the values are averaged over ranks (``reduce=False``: log this rank's values as
        they are, which evaluation on rank 0 does) and only rank 0 writes them.
        """
        if reduce and self.dist.is_distributed:
            metrics = self._reduce_metrics(metrics)
        self._ensure_logger().log(metrics, self.env_step if step is None else step)

    def take_timings(self) -> dict[str, float]:
        """``timing/<phase>`` seconds and ``throughput/tokens_per_s`` since the previous
        training record; resets them."""
        return self.timing.drain(idle_throughput=self.timing_idle_throughput)

    def log_due(self, step: int) -> bool:
        """The logging cadence of training records: the first one, then whenever the count of
        ``steps_unit`` is at least ``logging_steps`` past the last logged one (every record
        when it is <= 1). ``step`` is the record's env step, the count under
        ``steps_unit='env'``. Marks the count as logged when it is due."""
        if self.args.steps_unit == "optimizer":
            step = step_count(self)
        every, last = self.args.logging_steps, self._last_train_log_step
        if every <= 1 or last < 0 or step - last >= every:
            self._last_train_log_step = step
            return True
        return False

    def log_record(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Log a training record with the timings since the previous one (no cadence: for
        records of work that happens once, such as sampling a stage's preference data)."""
        self.log_metrics({**metrics, **self.take_timings(), **self.backend_metrics()}, step)

    def backend_metrics(self) -> dict[str, float]:
        """The rollout backend's diagnostics since the previous record (e.g. vLLM's
        ``rollout/logprob_abs_diff``); backends without ``drain_metrics`` have none."""
        drain = getattr(getattr(self, "rollout_backend", None), "drain_metrics", None)
        return drain() if drain is not None else {}

    def log_training(self, metrics: dict[str, float] | None, step: int) -> bool:
        """Log an update's ``metrics`` with the timings when the cadence says so."""
        if metrics is None or not self.log_due(step):
            return False
        self.log_record(metrics, step)
        self.write_completions(step)
        return True

    def _reduce_metrics(self, metrics: dict[str, Any]) -> dict[str, float]:
        keys = sorted(metrics)
        # A checksum of the key set rides along, so ranks logging different keys fail loudly
        # instead of averaging unrelated numbers.
        tag = float(zlib.crc32("\n".join(keys).encode()))
        reduced = reduce_metrics({**metrics, "\x00keys": tag}, self.dist)
        if reduced.pop("\x00keys") != tag:
            raise RuntimeError(
                f"Ranks logged different metric keys at env step {self.env_step} (rank "
                f"{self.dist.rank}: {keys}); every rank must log the same metrics."
            )
        return reduced

    # Progress bars: one per stage, labelled "<algorithm> <stage> i/n".
    progress_unit = "item"

    def stage_name(self) -> str:
        """What a stage is called in progress bars."""
        return "epoch"

    def progress_bar(self, total: int, stage: int):
        """The progress bar of ``stage`` (silent on ranks other than 0 and when not verbose)."""
        from tqdm.auto import tqdm

        return tqdm(
            total=total,
            desc=f"{self.algorithm_name} {self.stage_name()} {stage + 1}/{self.num_stages()}",
            unit=self.progress_unit,
            disable=not getattr(self, "verbose", True) or not self.is_main_process,
            dynamic_ncols=True,
        )

    @property
    def latest_reward_mean(self) -> float | None:
        """The mean training reward of the latest collected batch (None before the first)."""
        return self._last_reward_mean

    def update_progress(self, bar) -> None:
        """Show the latest training reward on the bar, under the family's ``progress_metric``."""
        if self._last_reward_mean is not None:
            label = getattr(self, "progress_metric", "reward")
            postfix = {label: f"{self._last_reward_mean:.3f}", "env_step": self.env_step}
            bar.set_postfix(postfix, refresh=False)
