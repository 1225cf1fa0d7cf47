"""TensorBoard sink: every numeric metric as a scalar in ``<run_dir>/tensorboard``."""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from typing import Any


class TensorBoardSink:
    """Writes scalars with ``torch.utils.tensorboard`` (needs the ``tensorboard`` package:
    ``pip install 'comlrl-core[tensorboard]'``). Non-numeric values (paths, texts) are left
    to the other sinks."""

    def __init__(self, run_dir: str | os.PathLike):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise ImportError(
                "report_to includes 'tensorboard' but the tensorboard package is not installed; "
                "install it with `pip install 'comlrl-core[tensorboard]'` or drop it from "
                "report_to."
            ) from exc
        self.log_dir = os.path.join(os.fspath(run_dir), "tensorboard")
        self.writer = SummaryWriter(log_dir=self.log_dir)

    def write(self, metrics: Mapping[str, Any], step: int) -> None:
        """Add every numeric value of ``metrics`` as a scalar at ``step``."""
        for key, value in metrics.items():
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                if math.isfinite(float(value)):
                    self.writer.add_scalar(key, float(value), global_step=int(step))
        self.writer.flush()

    def close(self) -> None:
        """Close the event file."""
        self.writer.close()
