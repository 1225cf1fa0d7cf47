"""Metric sinks: a JSONL file in the run dir (always), W&B (optional), and a progress bar."""

from comlrl.core.logging.jsonl import JsonlSink
from comlrl.core.logging.logger import MetricLogger
from comlrl.core.logging.wandb_sink import WandbSink, wandb_init_kwargs

__all__ = ["JsonlSink", "MetricLogger", "WandbSink", "wandb_init_kwargs"]
