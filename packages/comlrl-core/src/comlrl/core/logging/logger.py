"""One logger per trainer, fanning metrics out to every sink with one monotonic step counter."""

from __future__ import annotations

import os
from typing import Any

from comlrl.core.logging.completions import CompletionsLog, log_completions_table
from comlrl.core.logging.jsonl import JsonlSink
from comlrl.core.logging.sink import AUTO, Sink, resolve_report_to, sink_factories


class MetricLogger:
    """Fans metrics out to a JSONL file (always) and to the sinks that ``report_to`` names:
    ``wandb``, ``tensorboard`` or a registered one (see :mod:`comlrl.core.logging.sink`), each
    built by its factory with its own options (``sink_options[name]``; W&B's are the
    ``wandb_config``). ``report_to="auto"`` (the default) is W&B when a ``wandb_config`` is
    given, as in CoMLRL 1.4.3, and no other sink otherwise.

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
        report_to: str | list[str] | None = AUTO,
        sink_options: dict[str, dict] | None = None,
    ):
        self.enabled = enabled
        self.run_dir = str(run_dir) if run_dir is not None else None
        self.last_step = -1
        self.jsonl: JsonlSink | None = None
        self._closed_count = 0
        self._run_config = dict(run_config or {})
        wandb_options = dict(wandb_config or {})
        if not (wandb_options.get("name") or wandb_options.get("run_name")):
            wandb_options["name"] = default_name  # the W&B run is named after the run dir
        options = {**(sink_options or {}), "wandb": wandb_options}
        self.sinks: dict[str, Sink] = {}
        if enabled and self.run_dir is not None:
            self.jsonl = JsonlSink(os.path.join(self.run_dir, "metrics.jsonl"))
            factories = sink_factories()
            for name in resolve_report_to(report_to, wandb_config):
                make = factories[name]
                self.sinks[name] = make(self.run_dir, self._run_config, options.get(name, {}))
        # Records an earlier run left in this run dir's log; a fresh run sets them aside.
        self.inherited_records = self.jsonl.count if self.jsonl is not None else 0
        # Sampled completions (see comlrl.core.logging.completions); a resume rewinds them.
        self.completions = (
            CompletionsLog(self.run_dir) if self.jsonl is not None and self.run_dir else None
        )
        self._completions_checked = False

    def destinations(self) -> list[str]:
        """Where this logger's metrics go, one entry per sink (``metrics.jsonl`` first); a sink
        says it with a ``describe()`` method, else by its ``report_to`` name."""
        out = []
        if self.jsonl is not None and self.run_dir:
            out.append(os.path.join(self.run_dir, "metrics.jsonl"))
        for name, sink in self.sinks.items():
            describe = getattr(sink, "describe", None)
            out.append(describe() if callable(describe) else name)
        return out

    def start(self, resume_id: str | None = None) -> str | None:
        """Open every sink that has a run of its own (``start``), continuing ``resume_id``;
        returns the W&B run id (what checkpoints keep), or None."""
        for sink in self.sinks.values():
            start = getattr(sink, "start", None)  # optional: sinks with a run of their own
            if callable(start):
                start(resume_id)
        return self.wandb_run_id

    @property
    def wandb(self) -> Sink | None:
        """The W&B sink when ``report_to`` names it (its run id is the one checkpoints keep)."""
        return self.sinks.get("wandb")

    @property
    def wandb_run_id(self) -> str | None:
        """The W&B run id, or None."""
        return getattr(self.wandb, "run_id", None)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        """Send ``metrics`` to every sink at ``step``."""
        if not self.enabled or not metrics:
            return
        step = max(int(step), self.last_step)
        self.last_step = step
        if self.jsonl is not None:
            self.jsonl.write(metrics, step)
        for sink in self.sinks.values():
            sink.write(metrics, step)

    def note(self, values: dict[str, Any], step: int) -> None:
        """Send ``values`` to the sinks with a run of their own (those with ``finish``, such as
        W&B) only: notes about the run (where its models were saved) that the metrics file,
        which holds numbers, leaves out."""
        if not self.enabled or not values:
            return
        for sink in self.sinks.values():
            if callable(getattr(sink, "finish", None)):
                sink.write(values, max(int(step), self.last_step))

    def log_html(self, figures: dict[str, str], step: int) -> None:
        """Send figures (HTML or SVG text by key) to every sink with a ``log_html`` method; the
        metrics file, which holds numbers, leaves them out."""
        if not self.enabled or not figures:
            return
        for sink in self.sinks.values():
            log_html = getattr(sink, "log_html", None)  # optional: sinks that take figures
            if callable(log_html):
                log_html(figures, max(int(step), self.last_step))

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
        for sink in self.sinks.values():
            if callable(getattr(sink, "log_table", None)):
                log_completions_table(sink, rows, self.last_step)

    def reopen(self) -> None:
        """Open the JSONL log again after :meth:`close` (a second ``train()`` call appends)."""
        if self.enabled and self.run_dir is not None and self.jsonl is None:
            self.jsonl = JsonlSink(os.path.join(self.run_dir, "metrics.jsonl"))

    @property
    def records_written(self) -> int:
        """How many JSONL records the run dir holds (a resume cursor), also once closed (a
        checkpoint saved after ``train()`` returned)."""
        return self.jsonl.count if self.jsonl is not None else self._closed_count

    def rewind(self, records: int, step: int) -> None:
        """Keep the first ``records`` JSONL records and continue from ``step`` (resume)."""
        self.last_step = step
        if self.jsonl is not None:
            self.jsonl.truncate(records)
        if self.completions is not None:
            self.completions.truncate(records)
            self._completions_checked = True

    def close(self, finish_wandb: bool = True) -> None:
        """Close the JSONL file and every sink; a sink with a run of its own (W&B) is
        finished too unless ``finish_wandb`` is False, and then stays for later records (a
        ``save_model`` after ``train()``)."""
        if self.jsonl is not None:
            self._closed_count = self.jsonl.count
            self.jsonl.close()
            self.jsonl = None
        kept = {}
        for name, sink in self.sinks.items():
            sink.close()
            finish = getattr(sink, "finish", None)  # optional: sinks with a run of their own
            if callable(finish):
                if not finish_wandb:
                    kept[name] = sink
                    continue
                finish()
        self.sinks = kept
