"""The :class:`Sink` protocol and the registry of sinks that ``report_to`` chooses from.

A sink receives every record the logger writes. Built in: ``jsonl`` (always on: resume relies on
it, and the logger writes it itself), ``wandb`` and ``tensorboard``, both built through the same
factories as any other. A package adds its own under the entry-point group ``comlrl.sinks``: the
entry point names a factory ``factory(run_dir, run_config, options) -> Sink``; ``options`` is the
sink's own mapping (W&B's is the run's ``wandb_config``; ``sink_options`` gives the others theirs).

Besides ``write`` and ``close`` a sink may have ``log_table(key, columns, data, step)`` (tables of
sampled completions), ``log_html(figures, step)`` (figures as HTML or SVG text, by key: the
preference family's reward histograms), ``start(resume_id) -> run id`` (a sink with a run of
its own, opened when training starts, whose id checkpoints keep so a resumed run continues it)
and ``finish()`` (such a run outlives ``close``, which only ends a ``train()`` call, until
``finish``).
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


def require_sink_packages(report_to: list[str] | None) -> None:
    """Fail with the install command when a sink ``report_to`` names needs a package that is
    not installed; trainers call it while they are built, before any model loads."""
    names = report_to or ()
    require_packages(
        (package, f"report_to: [{name}]")
        for name, package in _SINK_PACKAGES.items()
        if name in names
    )


def check_report_to(value: Any, field: str = "report_to") -> list[str] | None:
    """``report_to`` as a list of sink names (None: only ``metrics.jsonl``)."""
    if value is None:
        return None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{field} must be a sink name or a list of names, got {value!r}.")
    valid = set(BUILT_IN) | set(sink_factories())
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise ValueError(
            f"{field}: unknown sink {unknown[0]!r}; choose from {', '.join(sorted(valid))} "
            f"(or register one under the entry-point group {ENTRY_POINT_GROUP!r})."
        )
    return list(dict.fromkeys(names))
