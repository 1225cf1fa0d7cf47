"""Metric sinks: a JSONL file in the run dir (always), W&B and TensorBoard (optional), and any
sink a package registers (:mod:`comlrl.core.logging.sink`)."""

from comlrl.core.logging.jsonl import JsonlSink
from comlrl.core.logging.logger import MetricLogger
from comlrl.core.logging.sink import Sink, check_report_to
from comlrl.core.logging.wandb_sink import WandbSink, wandb_init_kwargs

__all__ = [
    "JsonlSink",
    "MetricLogger",
    "Sink",
    "WandbSink",
    "check_report_to",
    "wandb_init_kwargs",
]
