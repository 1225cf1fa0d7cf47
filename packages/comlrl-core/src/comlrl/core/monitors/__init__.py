"""Reward-hacking monitors (docs/monitors.md): per agent and turn, the KL to the reference and
its acceleration, token entropy, completion-length drift, the share of zero-variance groups,
the clip fraction, and the gap between training and evaluation reward; thresholds that warn
once, and can stop the run cleanly after a checkpoint.

- :mod:`~comlrl.core.monitors.config`: the ``monitors`` config section;
- :mod:`~comlrl.core.monitors.metrics`: what is measured, from the rollout record and the steps;
- :mod:`~comlrl.core.monitors.watcher`: thresholds, trends, warnings, the stop request;
- :mod:`~comlrl.core.monitors.service`: the trainer's ``monitors`` collaborator that core feeds.
"""

from comlrl.core.monitors.config import MONITOR_NAMES, MONITORS, MonitorsConfig, check_monitors
from comlrl.core.monitors.service import SUMMARY_FILE, Monitors
from comlrl.core.monitors.watcher import MonitorWarning

__all__ = [
    "MONITORS",
    "MONITOR_NAMES",
    "SUMMARY_FILE",
    "MonitorWarning",
    "Monitors",
    "MonitorsConfig",
    "check_monitors",
]
