"""One logger per trainer, fanning metrics out to every sink with one monotonic step counter."""

from __future__ import annotations

import os
from typing import Any

from comlrl.core.logging.completions import CompletionsLog, log_completions_table
from comlrl.core.logging.jsonl import JsonlSink
from comlrl.core.logging.sink import BUILT_IN, Sink, sink_factories
from comlrl.core.logging.wandb_sink import WandbSink, wandb_init_kwargs


class MetricLogger:
    """Fans metrics out to a JSONL file (always) and to the sinks that ``report_to`` names:
    ``wandb`` (set up by ``wandb_config``, which alone turns nothing on), ``tensorboard``, or
    a registered one (see :mod:`comlrl.core.logging.sink`).

    Steps must not go backwards: a record at a lower step than the last one is logged at the
    last step instead, so W&B never drops it. Only the main process logs (``enabled=False``
    elsewhere).
    """

    def __init__(
        self,
        run_dir: str | os.PathLike | None,
        *,
        wandb_config: dict | None = None,
        run_config: dict | None = None,
        default_name: str = "comlrl",
        enabled: bool = True,
        report_to: list[str] | None = None,
    ):
        self.enabled = enabled
        self.run_dir = str(run_dir) if run_dir is not None else None
        self.last_step = -1
        self.jsonl: JsonlSink | None = None
        self.wandb: WandbSink | None = None
        wandb_on = "wandb" in (report_to or ())
        self._wandb_config = dict(wandb_config or {}) if wandb_on else None
        self._run_config = dict(run_config or {})
        self._default_name = default_name
        self.sinks: list[Sink] = []
        if enabled and self.run_dir is not None:
            self.jsonl = JsonlSink(os.path.join(self.run_dir, "metrics.jsonl"))
            factories = sink_factories()
            for name in report_to or ():
                if name not in BUILT_IN:
                    options = dict(wandb_config or {})
                    self.sinks.append(factories[name](self.run_dir, self._run_config, options))
        # Records an earlier run left in this run dir's log; a fresh run sets them aside.
        self.inherited_records = self.jsonl.count if self.jsonl is not None else 0
        # Sampled completions (see comlrl.core.logging.completions); a resume rewinds them.
        self.completions = CompletionsLog(self.run_dir) if self.jsonl is not None else None
        self._completions_checked = False

    def start_wandb(self, resume_id: str | None = None) -> str | None:
        """Open the W&B run (resuming ``resume_id`` when given); returns its id."""
        if not self.enabled or self._wandb_config is None or self.wandb is not None:
            return self.wandb.run_id if self.wandb else None
        kwargs = wandb_init_kwargs(self._wandb_config, self._run_config, self._default_name)
        if resume_id is not None and "id" not in kwargs:
            kwargs["id"] = resume_id
            kwargs.setdefault("resume", "allow")
        self.wandb = WandbSink(kwargs)
        return self.wandb.run_id

    @property
    def wandb_run_id(self) -> str | None:
        """The W&B run id, or None."""
        return self.wandb.run_id if self.wandb is not None else None

    def log(self, metrics: dict[str, Any], step: int) -> None:
        """Send ``metrics`` to every sink at ``step``."""
        if not self.enabled or not metrics:
            return
        step = max(int(step), self.last_step)
        self.last_step = step
        if self.jsonl is not None:
            self.jsonl.write(metrics, step)
        if self.wandb is not None:
            self.wandb.write(metrics, step)
        for sink in self.sinks:
            sink.write(metrics, step)

    def log_completions(self, rows: list[dict[str, Any]], step: int) -> None:
        """Append sampled completions that belong to the metrics record just written at
        ``step``, and log them as a table to W&B and to every sink with a ``log_table`` method
        (TensorBoard writes it as text)."""
        if not self.enabled or not rows or self.completions is None or self.jsonl is None:
            return
        if not self._completions_checked:
            # A resume has rewound the file already; otherwise it is an earlier run's.
            self._completions_checked = True
            self.completions.set_aside()
        self.completions.append(rows, self.last_step, self.records_written - 1)
        if self.wandb is not None:
            log_completions_table(self.wandb, rows, self.last_step)
        for sink in self.sinks:
            if callable(getattr(sink, "log_table", None)):
                log_completions_table(sink, rows, self.last_step)

    def reopen(self) -> None:
        """Open the JSONL log again after :meth:`close` (a second ``train()`` call appends)."""
        if self.enabled and self.run_dir is not None and self.jsonl is None:
            self.jsonl = JsonlSink(os.path.join(self.run_dir, "metrics.jsonl"))

    @property
    def records_written(self) -> int:
        """How many JSONL records the run dir holds (a resume cursor)."""
        return self.jsonl.count if self.jsonl is not None else 0

    def rewind(self, records: int, step: int) -> None:
        """Keep the first ``records`` JSONL records and continue from ``step`` (resume)."""
        self.last_step = step
        if self.jsonl is not None:
            self.jsonl.truncate(records)
        if self.completions is not None:
            self.completions.truncate(records)
            self._completions_checked = True

    def close(self, finish_wandb: bool = True) -> None:
        """Close the JSONL file and, unless told otherwise, finish the W&B run."""
        if self.jsonl is not None:
            self.jsonl.close()
            self.jsonl = None
        if finish_wandb and self.wandb is not None:
            self.wandb.close()
            self.wandb = None
        for sink in self.sinks:
            sink.close()
        self.sinks = []
