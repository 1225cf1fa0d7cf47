"""The :class:`Sink` protocol and the registry of sinks that ``report_to`` chooses from.

A sink receives every record the logger writes. Built in: ``jsonl`` (always on: resume relies on
it, and the logger writes it itself), ``wandb`` and ``tensorboard``, both built through the same
factories as any other. A package adds its own under the entry-point group ``comlrl.sinks``: the
entry point names a factory ``factory(run_dir, run_config, options) -> Sink``; ``options`` is the
sink's own mapping (W&B's is the run's ``wandb_config``; ``sink_options`` gives the others theirs).

Besides ``write`` and ``close`` a sink may have ``log_table(key, columns, data, step)`` (tables of
sampled completions), ``log_html(figures, step)`` (figures as HTML or SVG text, by key: the
preference family's reward histograms), ``start(resume_id) -> run id`` (a sink with a run of
its own, opened when training starts, whose id checkpoints keep so a resumed run continues it),
``describe() -> str`` (where it writes, for the line a run starts with) and ``finish()`` (such
a run outlives ``close``, which only ends a ``train()`` call, until ``finish``).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from comlrl.core.errors import require_packages

ENTRY_POINT_GROUP = "comlrl.sinks"


@runtime_checkable
class Sink(Protocol):
    """Where logged metrics go."""

    def write(self, metrics: Mapping[str, Any], step: int) -> None:
        """Record ``metrics`` at ``step`` (steps never go backwards)."""
        ...

    def close(self) -> None:
        """Flush and release the sink."""
        ...


def _tensorboard(run_dir: str, run_config: dict, options: dict) -> Sink:
    from comlrl.core.logging.tensorboard import TensorBoardSink

    return TensorBoardSink(run_dir)


def _wandb(run_dir: str, run_config: dict, options: dict) -> Sink:
    from comlrl.core.logging.wandb_sink import wandb_sink

    return wandb_sink(run_dir, run_config, options)


# The sink the logger writes itself, and the ones built from a factory.
BUILT_IN = ("jsonl",)
_FACTORIES: dict[str, Callable[..., Sink]] = {"tensorboard": _tensorboard, "wandb": _wandb}


def register_sink(name: str, factory: Callable[..., Sink]) -> None:
    """Make ``factory(run_dir, run_config, options) -> Sink`` available as ``report_to: [name]``
    in this process (a package registers through the entry-point group instead)."""
    if name in BUILT_IN or name in ("wandb", "tensorboard"):
        raise ValueError(f"{name!r} is a built-in sink; choose another name.")
    _FACTORIES[name] = factory


def sink_factories() -> dict[str, Callable[..., Sink]]:
    """Every factory-built sink by name: the built-in ones and the entry points'."""
    found = dict(_FACTORIES)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep.load())
    return found


# The package each built-in optional sink needs.
_SINK_PACKAGES = {"wandb": "wandb", "tensorboard": "tensorboard"}


def require_sink_packages(report_to: Any, wandb_config: dict | None = None) -> None:
    """Fail with the install command when a sink that ``report_to`` chooses (with
    ``wandb_config``, see :func:`resolve_report_to`) needs a package that is not installed;
    trainers and the CLI call it before any model loads."""
    names = resolve_report_to(report_to, wandb_config)
    auto = check_report_to(report_to) == AUTO
    require_packages(
        (
            package,
            "a wandb_config (report_to='auto', the default, logs to W&B when one is given; "
            "report_to='none' turns W&B off)"
            if auto
            else f"report_to: [{name}]",
        )
        for name, package in _SINK_PACKAGES.items()
        if name in names
    )


# ``report_to``'s default: W&B when a ``wandb_config`` (a run file's ``wandb:`` section) is
# given, as CoMLRL 1.4.3 logged, else only the local sinks.
AUTO = "auto"
# Words that name no sink besides the always-written ``metrics.jsonl`` (TRL's spelling).
NONE = "none"


def check_report_to(value: Any, field: str = "report_to") -> str | list[str] | None:
    """``report_to`` checked: ``"auto"`` as it is, a list of sink names otherwise (None, ``"none"``
    and ``[]`` name no sink besides ``metrics.jsonl``; None stays None)."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    if isinstance(value, str) and value.strip().lower() == NONE:
        return []
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ValueError(
            f"{field} must be 'auto', 'none', a sink name or a list of names, got {value!r}."
        )
    if AUTO in names or NONE in names:
        raise ValueError(
            f"{field}: {AUTO!r} and {NONE!r} stand alone, not in a list ({list(names)!r}); "
            "write report_to: auto, report_to: none, or list the sinks."
        )
    valid = set(BUILT_IN) | set(sink_factories())
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise ValueError(
            f"{field}: unknown sink {unknown[0]!r}; choose from {', '.join(sorted(valid))} "
            f"(or register one under the entry-point group {ENTRY_POINT_GROUP!r}), or write "
            f"{AUTO!r} or {NONE!r}."
        )
    return list(dict.fromkeys(names))


def resolve_report_to(report_to: Any, wandb_config: dict | None) -> list[str]:
    """The sinks a run writes to besides ``metrics.jsonl``: ``report_to`` as given, except that
    ``"auto"`` means ``["wandb"]`` when ``wandb_config`` is given (CoMLRL 1.4.3's behaviour)
    and no other sink otherwise."""
    checked = check_report_to(report_to)
    if checked == AUTO:
        return ["wandb"] if wandb_config is not None else []
    return [n for n in checked or () if n not in BUILT_IN]
