"""Curves of one or more runs from their ``metrics.jsonl`` (``comlrl plot``).

Each panel holds the series of the metric keys that match its patterns (``fnmatch`` globs),
one line per run and key, against the env step. The default panels are reward per turn
(training and eval), loss per agent, KL and timings; panels without data are left out. Needs
matplotlib (``pip install 'comlrl-core[plot]'``); pyplot is not used, so plotting touches no
global backend state.
"""

from __future__ import annotations

import fnmatch
import json
import math
import numbers
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from comlrl.core.errors import missing_package
from comlrl.core.logging.jsonl import _complete_lines

METRICS_FILE = "metrics.jsonl"
DEFAULT_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reward per turn", ("turn_*/reward_mean", "eval/turn_*/reward_mean")),
    ("loss per agent", ("agent_*/loss", "agent_*/*_loss", "dpo/loss")),
    ("KL", ("*kl*",)),
    ("timings (s)", ("timing/*",)),
)


def metrics_path(run: str | os.PathLike) -> str:
    """The metrics file of ``run``: a run directory or a ``metrics.jsonl`` file itself."""
    run = os.fspath(run)
    path = os.path.join(run, METRICS_FILE) if os.path.isdir(run) else run
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"RUN: {run} has no {METRICS_FILE}; expected a run directory written by "
            "`comlrl train` (or a metrics.jsonl file)."
        )
    return path


def read_series(run: str | os.PathLike) -> dict[str, tuple[list[int], list[float]]]:
    """Every numeric metric of a run as ``{key: (steps, values)}`` (non-finite values and
    texts are skipped; a line cut short by a crash ends the log)."""
    series: dict[str, tuple[list[int], list[float]]] = {}
    for line in _complete_lines(Path(metrics_path(run))):
        record = json.loads(line)
        step = record.get("step")
        for key, value in record.items():
            if key == "step" or isinstance(value, bool) or not isinstance(value, numbers.Real):
                continue
            if not math.isfinite(float(value)):
                continue
            steps, values = series.setdefault(key, ([], []))
            steps.append(int(step))
            values.append(float(value))
    return series


def run_labels(runs: Sequence[str | os.PathLike]) -> list[str]:
    """Short names of the runs for legends: the directory names, or paths where they clash."""
    names = []
    for run in runs:
        run = os.path.normpath(os.fspath(run))
        if not os.path.isdir(run):
            run = os.path.dirname(run) or run
        names.append(os.path.basename(run) or run)
    if len(set(names)) < len(names):
        return [os.path.normpath(os.fspath(r)) for r in runs]
    return names


def panels_for(metrics: Sequence[str] | None) -> list[tuple[str, tuple[str, ...]]]:
    """The panels to draw: one per pattern of ``metrics``, else the default panels."""
    if not metrics:
        return list(DEFAULT_PANELS)
    return [(pattern, (pattern,)) for pattern in metrics]


def _matching(keys: Sequence[str], patterns: Sequence[str]) -> list[str]:
    return sorted(k for k in keys if any(fnmatch.fnmatchcase(k, p) for p in patterns))


def default_output(runs: Sequence[str | os.PathLike]) -> str:
    """Where ``comlrl plot`` writes without ``--out``: ``curves.png`` in the first run."""
    first = os.fspath(runs[0])
    return os.path.join(first if os.path.isdir(first) else os.path.dirname(first), "curves.png")


def plot_runs(
    runs: Sequence[str | os.PathLike],
    out: str | os.PathLike | None = None,
    metrics: Sequence[str] | None = None,
) -> Any:
    """Draw the runs' curves overlaid and return the matplotlib ``Figure``; with ``out`` the
    figure is also written there as PNG.

    A line's label is ``<run>: <key>`` (just ``<key>`` for one run). A pattern of ``metrics``
    that matches nothing in any run is an error naming it and the keys there are.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise missing_package("matplotlib") from exc
    if not runs:
        raise ValueError("RUN: name at least one run directory.")
    data = [read_series(r) for r in runs]
    labels = run_labels(runs)
    every_key = sorted({k for d in data for k in d})
    drawn = []
    for title, patterns in panels_for(metrics):
        keys = _matching(every_key, patterns)
        if keys:
            drawn.append((title, keys))
        elif metrics:
            raise ValueError(
                f"comlrl plot --metrics: {patterns[0]!r} matches no metric of these runs; they have: "
                f"{', '.join(every_key[:20])}{', ...' if len(every_key) > 20 else ''}."
            )
    if not drawn:
        raise ValueError(f"RUN: no numeric metrics to plot in {', '.join(map(str, runs))}.")
    fig = Figure(figsize=(8, 2.8 * len(drawn)), layout="constrained")
    axes = fig.subplots(len(drawn), 1, squeeze=False)[:, 0]
    for ax, (title, keys) in zip(axes, drawn):
        for label, series in zip(labels, data):
            for key in keys:
                if key in series:
                    steps, values = series[key]
                    name = key if len(runs) == 1 else f"{label}: {key}"
                    ax.plot(steps, values, label=name, marker="." if len(steps) < 20 else None)
        ax.set_title(title)
        ax.set_xlabel("env step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="best")
    if out is not None:
        out = os.fspath(out)
        parent = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"comlrl plot --out: the directory {parent} does not exist.")
        fig.savefig(out, format="png", dpi=100)
    return fig
