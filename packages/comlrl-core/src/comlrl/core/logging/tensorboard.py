"""TensorBoard sink: every numeric metric as a scalar in ``<run_dir>/tensorboard``, and tables
(the sampled completions) as text."""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from typing import Any

from comlrl.core.errors import missing_package


def _cell(value: Any) -> str:
    # A Markdown table cell: TensorBoard renders text summaries as Markdown, so a newline or a
    # pipe inside a completion would break the row.
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")


def markdown_table(columns: list[str], data: list[list[Any]]) -> str:
    """``data`` rows under ``columns`` as a Markdown table."""
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    lines.extend("| " + " | ".join(_cell(v) for v in row) + " |" for row in data)
    return "\n".join(lines)


class TensorBoardSink:
    """Writes scalars with ``torch.utils.tensorboard`` (needs the ``tensorboard`` package:
    ``pip install 'comlrl-core[tensorboard]'``). Non-numeric values (paths, texts) are left
    to the other sinks; tables go in as Markdown text."""

    def __init__(self, run_dir: str | os.PathLike):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise missing_package("tensorboard") from exc
        self.log_dir = os.path.join(os.fspath(run_dir), "tensorboard")
        self.writer = SummaryWriter(log_dir=self.log_dir)

    def describe(self) -> str:
        """Where this sink writes, for the run's first lines."""
        return f"TensorBoard ({self.log_dir})"

    def write(self, metrics: Mapping[str, Any], step: int) -> None:
        """Add every numeric value of ``metrics`` as a scalar at ``step``."""
        for key, value in metrics.items():
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                if math.isfinite(float(value)):
                    self.writer.add_scalar(key, float(value), global_step=int(step))
        self.writer.flush()

    def log_table(self, key: str, columns: list[str], data: list[list[Any]], step: int) -> None:
        """Add ``data`` rows under ``columns`` as a Markdown text summary ``key`` at ``step``."""
        self.writer.add_text(key, markdown_table(columns, data), global_step=int(step))
        self.writer.flush()

    def close(self) -> None:
        """Close the event file."""
        self.writer.close()
