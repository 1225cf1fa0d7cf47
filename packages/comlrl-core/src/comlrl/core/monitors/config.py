"""The ``monitors`` config section: which thresholds warn, and which of them stop the run.

Every trainer's config has a ``monitors`` field (``CommonConfig``); a YAML run file sets it with
a top-level ``monitors:`` section (or ``monitors:`` inside the algorithm's section), Python with
``MAGRPOConfig(monitors={...})`` or ``monitors=MonitorsConfig(...)``. Whatever is given becomes
one :class:`MonitorsConfig`, every value checked, and an error names the field
(``monitors.kl_max``) and what is valid.

The defaults keep the monitors quiet on a healthy run: they log every metric, and only the
thresholds whose meaning depends neither on the task's reward scale nor on the model are set:
entropy collapse (below 0.01 nats per token) and most tokens clipped (above half). Tied groups
are not watched by default: a task the agents have solved ties every group at its best reward
(the demo does by its last epochs), which says "no more signal", not "hacked".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from comlrl.core.config.validation import check_bool, check_int, check_number


@dataclass(frozen=True)
class Monitor:
    """One watched quantity: its ``name`` (the metric key's last part and what ``stop_on``
    names), the config field of its threshold, whether crossing means rising ``above`` it or
    falling ``below``, whether the threshold applies to the value's magnitude, and whether the
    value is a fraction (its threshold then lies in [0, 1])."""

    name: str
    threshold_field: str
    above: bool = True
    magnitude: bool = False
    fraction: bool = False
    about: str = ""


# Every monitor, in the order the docs and the summary list them.
MONITORS: tuple[Monitor, ...] = (
    Monitor("kl", "kl_max", about="mean per-token KL to the reference"),
    Monitor(
        "kl_acceleration",
        "kl_acceleration_max",
        about="how fast the KL's growth per update is itself growing",
    ),
    Monitor("entropy", "entropy_min", above=False, about="mean token entropy of the policy"),
    Monitor(
        "length_drift",
        "length_drift_max",
        magnitude=True,
        about="relative change of the mean completion length from the run's first updates",
    ),
    Monitor(
        "zero_variance_fraction",
        "zero_variance_max",
        fraction=True,
        about="share of groups whose completions all got the same reward",
    ),
    Monitor(
        "clip_fraction",
        "clip_fraction_max",
        fraction=True,
        about="share of tokens the ratio clip held",
    ),
    Monitor(
        "train_eval_gap",
        "train_eval_gap_max",
        about="training reward minus evaluation reward",
    ),
)
MONITOR_NAMES: tuple[str, ...] = tuple(m.name for m in MONITORS)
BY_NAME: dict[str, Monitor] = {m.name: m for m in MONITORS}


@dataclass
class MonitorsConfig:
    """Thresholds of the reward-hacking monitors (docs/monitors.md). A threshold of None logs
    the metric without watching it."""

    enabled: bool = True
    kl_max: float | None = None
    kl_acceleration_max: float | None = None
    entropy_min: float | None = 0.01
    length_drift_max: float | None = None
    zero_variance_max: float | None = None
    clip_fraction_max: float | None = 0.5
    train_eval_gap_max: float | None = None
    window: int = 5
    patience: int = 2
    stop_on: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.enabled = check_bool("monitors.enabled", self.enabled)
        for monitor in MONITORS:
            name = f"monitors.{monitor.threshold_field}"
            value = getattr(self, monitor.threshold_field)
            high = 1.0 if monitor.fraction else None
            checked = check_number(name, value, 0.0, high, allow_none=True)
            setattr(self, monitor.threshold_field, checked)
        self.window = check_int("monitors.window", self.window, 2)
        self.patience = check_int("monitors.patience", self.patience, 1)
        self.stop_on = _check_stop_on(self.stop_on, self)

    def threshold(self, monitor: Monitor) -> float | None:
        """The threshold ``monitor`` is watched against (None: not watched)."""
        return getattr(self, monitor.threshold_field)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for saved configs and the run summary)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _check_stop_on(value: Any, config: MonitorsConfig) -> list[str]:
    if value is None:
        return []
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ValueError(
            f"monitors.stop_on must be a list of monitor names ({', '.join(MONITOR_NAMES)}), "
            f"got {value!r}."
        )
    out = []
    for name in names:
        key = name.strip().lower()
        if key not in BY_NAME:
            raise ValueError(
                f"monitors.stop_on: unknown monitor {name!r}; choose from "
                f"{', '.join(MONITOR_NAMES)}."
            )
        monitor = BY_NAME[key]
        if config.threshold(monitor) is None:
            raise ValueError(
                f"monitors.stop_on names {key!r}, whose threshold monitors."
                f"{monitor.threshold_field} is None; set it, or leave {key!r} out of stop_on."
            )
        if key not in out:
            out.append(key)
    return out


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(MonitorsConfig))


def check_monitors(name: str, value: Any) -> MonitorsConfig:
    """``value`` (None, a mapping of :class:`MonitorsConfig` fields, or one) as a checked
    :class:`MonitorsConfig`; None is the defaults. Unknown keys are an error naming the
    valid ones."""
    if value is None:
        return MonitorsConfig()
    if isinstance(value, MonitorsConfig):
        # Checked again: a field may have been assigned after construction.
        return MonitorsConfig(**value.to_dict())
    if not isinstance(value, Mapping):
        raise ValueError(
            f"{name} must be a mapping of monitor settings ({', '.join(FIELD_NAMES)}), a "
            f"MonitorsConfig or None, got {type(value).__name__} {value!r}."
        )
    unknown = [k for k in value if k not in FIELD_NAMES]
    if unknown:
        from comlrl.core.config.run_file import nearest_hint

        raise ValueError(
            f"{name}: unknown key {unknown[0]!r}{nearest_hint(unknown[0], FIELD_NAMES)}; "
            f"valid: {', '.join(FIELD_NAMES)}."
        )
    return MonitorsConfig(**dict(value))
