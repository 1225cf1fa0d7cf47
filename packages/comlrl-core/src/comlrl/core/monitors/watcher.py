"""The threshold watcher: series of monitor values, their trends, one warning per crossing.

Each monitor key (one monitor of one agent and turn) keeps a series of its readings, one per
update (the train/eval gap: one per evaluation). A reading past the monitor's threshold counts
when ``patience`` readings in a row are past it; the first time that happens for a key, the
watcher warns once (:class:`MonitorWarning`) with the value, the threshold, the recent values
and their slope per reading, and, when the monitor is in ``stop_on``, asks the run to stop.
Everything here is plain data, so a checkpoint carries it and a resumed run neither warns again
nor forgets a trend.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from comlrl.core.monitors.config import BY_NAME, Monitor, MonitorsConfig
from comlrl.core.monitors.metrics import parse_key, parse_monitor_key

# Readings each series keeps for its trend (the summary keeps its own running figures).
HISTORY = 64


class MonitorWarning(UserWarning):
    """A reward-hacking monitor crossed its threshold (filter it with ``warnings``)."""


def slope(values: list[float]) -> float:
    """The least-squares slope of ``values`` against their index (0 for fewer than two)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean_x = (n - 1) / 2
    mean_y = sum(values) / n
    num = sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values))
    den = sum((i - mean_x) ** 2 for i in range(n))
    return num / den


@dataclass
class Series:
    """One key's readings: the recent ones, the running summary and the crossing state."""

    recent: list[float] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    count: int = 0
    first: float | None = None
    low: float | None = None
    high: float | None = None
    streak: int = 0
    crossed_at: int | None = None
    crossed_value: float | None = None

    def add(self, value: float, step: int) -> None:
        """Append a reading."""
        self.recent = [*self.recent, value][-HISTORY:]
        self.steps = [*self.steps, int(step)][-HISTORY:]
        self.count += 1
        self.first = value if self.first is None else self.first
        self.low = value if self.low is None else min(self.low, value)
        self.high = value if self.high is None else max(self.high, value)


def past(monitor: Monitor, value: float, threshold: float) -> bool:
    """Whether ``value`` is past ``threshold`` the way ``monitor`` crosses."""
    v = abs(value) if monitor.magnitude else value
    return v > threshold if monitor.above else v < threshold


def where(metric: str) -> str:
    """``agent 0, turn 1`` for a monitor key (the part of the run it watches)."""
    parsed = parse_key(metric)
    if parsed is None:
        return metric
    agent, turn, _ = parsed
    parts = [] if agent is None else [f"agent {agent}"]
    if turn is not None:
        parts.append(f"turn {turn + 1}")
    return ", ".join(parts) or "the run"


class Watcher:
    """Watches monitor values against a :class:`MonitorsConfig`."""

    def __init__(self, config: MonitorsConfig):
        self.config = config
        self.series: dict[str, Series] = {}
        # The first crossing of a monitor in stop_on: (key, message); the loop stops on it.
        self.stop: tuple[str, str] | None = None

    def observe(self, values: Mapping[str, float], step: int) -> list[str]:
        """Take one reading of every monitor key in ``values`` (keys of other metrics are
        ignored); returns the keys that crossed for the first time."""
        crossed = []
        for metric, value in values.items():
            parsed = parse_key(metric)
            if parsed is None or parsed[2] not in BY_NAME or not math.isfinite(value):
                continue
            monitor = BY_NAME[parsed[2]]
            series = self.series.setdefault(metric, Series())
            series.add(float(value), step)
            threshold = self.config.threshold(monitor)
            if threshold is None:
                continue
            series.streak = series.streak + 1 if past(monitor, value, threshold) else 0
            if series.streak >= self.config.patience and series.crossed_at is None:
                series.crossed_at, series.crossed_value = int(step), float(value)
                crossed.append(metric)
                self._warn(metric, monitor, series, threshold, step)
        return crossed

    def _warn(self, metric: str, monitor: Monitor, series: Series, threshold: float, step: int):
        recent = series.recent[-self.config.window :]
        op = ">" if monitor.above else "<"
        value = series.recent[-1]
        shown = f"|{value:.4g}|" if monitor.magnitude else f"{value:.4g}"
        stopping = monitor.name in self.config.stop_on
        message = (
            f"monitor {monitor.name} ({where(metric)}) crossed its threshold at step {step}: "
            f"{shown} {op} monitors.{monitor.threshold_field}={threshold:g} for "
            f"{series.streak} reading(s); recent values "
            f"[{', '.join(f'{v:.4g}' for v in recent)}], slope {slope(recent):+.3g} per "
            f"reading ({metric})."
        )
        if stopping:
            message += " It is in monitors.stop_on: the run checkpoints and stops."
            if self.stop is None:
                self.stop = (metric, message)
        warnings.warn(message, MonitorWarning, stacklevel=2)

    # ------------------------------------------------------------------ summary and state
    def summary(self) -> dict[str, Any]:
        """Every series in words and numbers: readings, first/last/min/max, the recent slope,
        and the step and value of its crossing (None: never crossed)."""
        out: dict[str, Any] = {}
        for metric, s in sorted(self.series.items()):
            monitor = BY_NAME[parse_monitor_key(metric)[2]]
            out[metric] = {
                "monitor": monitor.name,
                "where": where(metric),
                "threshold": self.config.threshold(monitor),
                "readings": s.count,
                "first": s.first,
                "last": s.recent[-1] if s.recent else None,
                "min": s.low,
                "max": s.high,
                "slope": slope(s.recent[-self.config.window :]),
                "crossed_at_step": s.crossed_at,
                "crossed_value": s.crossed_value,
            }
        return out

    def state_dict(self) -> dict[str, Any]:
        """Plain data for checkpoints."""
        return {
            "series": {k: dict(vars(s)) for k, s in self.series.items()},
            "stop": list(self.stop) if self.stop else None,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Inverse of :meth:`state_dict`. A saved stop request is not restored: a resumed run
        continues past the crossing that stopped it (it warned already) unless the monitor
        crosses again in a key that had not crossed."""
        self.series = {k: Series(**v) for k, v in state.get("series", {}).items()}
        self.stop = None
