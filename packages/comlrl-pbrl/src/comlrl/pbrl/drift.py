"""The reward-distribution ("drift") logger of the iterative trainers.

Per iteration it histograms the raw task rewards of the target (current policy) and comparator
candidates over the reward function's declared ``reward_range`` (16 equal bins; values outside
the range fall into the edge bins), both for every scored candidate ("candidate") and for the
pairs finally trained on ("selected"). Each iteration writes ``iteration_NNNN.json``, an SVG
plot ``iteration_NNNN.svg`` and, when matplotlib is installed (``comlrl-core[plot]``), the same
plot as ``iteration_NNNN.png`` (without matplotlib a warning says once that PNGs are skipped);
scalar summaries go to the metric logger, and when W&B is active small inline SVG histograms go
there too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import warnings
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

NUM_BINS = 16
SERIES = ("target", "comparator")
COLORS = {"target": "#1f77b4", "comparator": "#ff7f0e"}


class RewardHistogram:
    """Equal-width bins over ``(low, high)``."""

    def __init__(self, low: float, high: float, num_bins: int = NUM_BINS):
        if not low < high:
            raise ValueError(f"reward_range needs low < high, got ({low}, {high}).")
        self.low, self.high, self.num_bins = float(low), float(high), num_bins
        width = (self.high - self.low) / num_bins
        self.edges = [self.low + width * i for i in range(num_bins)] + [self.high]
        self.centers = [(a + b) / 2 for a, b in zip(self.edges[:-1], self.edges[1:])]

    def counts(self, values: Sequence[float]) -> list[int]:
        """Bin counts; out-of-range values are clipped into the first or last bin."""
        out = [0] * self.num_bins
        span = self.high - self.low
        for v in values:
            idx = int((float(v) - self.low) / span * self.num_bins)
            out[min(max(idx, 0), self.num_bins - 1)] += 1
        return out

    def series(self, values: Sequence[float]) -> dict[str, Any]:
        """``{sample_count, mean, counts, raw_rewards}`` of one series."""
        values = [float(v) for v in values]
        return {
            "sample_count": len(values),
            "mean": sum(values) / len(values) if values else None,
            "counts": self.counts(values),
            "raw_rewards": values,
        }


def iteration_record(
    hist: RewardHistogram,
    iteration: int,
    candidate: dict[str, Sequence[float]],
    selected: dict[str, Sequence[float]],
    pair_count: int,
) -> dict[str, Any]:
    """The JSON document of one iteration (1-based ``iteration``)."""
    return {
        "iteration": iteration,
        "reward_min": hist.low,
        "reward_max": hist.high,
        "num_bins": hist.num_bins,
        "bin_edges": hist.edges,
        "bin_centers": hist.centers,
        "candidate": {name: hist.series(candidate.get(name, [])) for name in SERIES},
        "selected": {
            "pair_count": pair_count,
            **{name: hist.series(selected.get(name, [])) for name in SERIES},
        },
    }


def summary_metrics(record: dict[str, Any]) -> dict[str, float]:
    """Scalar metrics under ``iter/reward_distribution`` and ``iter/selected_reward_distribution``."""
    out: dict[str, float] = {}
    for section, ns in (
        ("candidate", "iter/reward_distribution"),
        ("selected", "iter/selected_reward_distribution"),
    ):
        data = record[section]
        out[f"{ns}/current_iteration"] = float(record["iteration"])
        if section == "selected":
            out[f"{ns}/pair_count"] = float(data["pair_count"])
        for name in SERIES:
            out[f"{ns}/{name}_sample_count"] = float(data[name]["sample_count"])
            if data[name]["mean"] is not None:
                out[f"{ns}/{name}_mean"] = float(data[name]["mean"])
    return out


def _bars(x0, y0, w, h, counts_by_series, top, kind):
    parts = []
    n = len(next(iter(counts_by_series.values())))
    bin_w = w / n
    for s_idx, (name, counts) in enumerate(counts_by_series.items()):
        color = COLORS.get(name, "#555")
        if kind == "bar":
            bar_w = bin_w / len(counts_by_series)
            for b, c in enumerate(counts):
                bh = h * c / top if top else 0
                x = x0 + b * bin_w + s_idx * bar_w
                parts.append(
                    f'<rect x="{x:.2f}" y="{y0 + h - bh:.2f}" width="{bar_w * 0.9:.2f}" '
                    f'height="{bh:.2f}" fill="{color}" fill-opacity="0.8"/>'
                )
        else:
            points = " ".join(
                f"{x0 + (b + 0.5) * bin_w:.2f},{y0 + h - (h * c / top if top else 0):.2f}"
                for b, c in enumerate(counts)
            )
            parts.append(
                f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.5"/>'
            )
    return parts


def histogram_svg(
    record: dict[str, Any], section: str, kind: str = "bar", width: int = 240, height: int = 80
) -> str:
    """A small histogram of one section ("candidate" or "selected") as an SVG string."""
    data = record[section]
    counts = {name: data[name]["counts"] for name in SERIES}
    top = max([1] + [c for cs in counts.values() for c in cs])
    body = _bars(2, 2, width - 4, height - 4, counts, top, kind)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><rect width="100%" height="100%" fill="white"/>'
        + "".join(body)
        + "</svg>"
    )


def render_svg(record: dict[str, Any]) -> str:
    """The iteration's plot: candidate and selected histograms side by side, with axes and a
    legend."""
    pw, ph, margin = 300, 160, 40
    width, height = 2 * pw + 3 * margin, ph + 2 * margin + 20
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13">'
        f"Reward distribution, iteration {int(record['iteration'])}</text>",
    ]
    for p, section in enumerate(("candidate", "selected")):
        x0, y0 = margin + p * (pw + margin), margin
        data = record[section]
        counts = {name: data[name]["counts"] for name in SERIES}
        top = max([1] + [c for cs in counts.values() for c in cs])
        parts.append(
            f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>'
        )
        parts.extend(_bars(x0, y0, pw, ph, counts, top, "bar"))
        parts.extend(_bars(x0, y0, pw, ph, counts, top, "line"))
        title = "all candidates" if section == "candidate" else "selected pairs"
        parts.append(
            f'<text x="{x0 + pw / 2}" y="{y0 - 6}" text-anchor="middle">{escape(title)}</text>'
        )
        parts.append(f'<text x="{x0}" y="{y0 + ph + 14}">{record["reward_min"]:.3g}</text>')
        parts.append(
            f'<text x="{x0 + pw}" y="{y0 + ph + 14}" text-anchor="end">'
            f"{record['reward_max']:.3g}</text>"
        )
        parts.append(f'<text x="{x0 - 4}" y="{y0 + 8}" text-anchor="end">{top}</text>')
    lx = margin
    for s_idx, name in enumerate(SERIES):
        x = lx + s_idx * 110
        y = height - 10
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{COLORS[name]}"/>')
        parts.append(f'<text x="{x + 14}" y="{y}">{name}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_png(record: dict[str, Any], path: str) -> str:
    """The iteration's plot (:func:`drift_figure`) written atomically to ``path`` as a PNG."""
    tmp = path + ".tmp"
    drift_figure(record).savefig(tmp, format="png", dpi=100)
    os.replace(tmp, path)
    return path


def drift_figure(record: dict[str, Any]) -> Any:
    """The iteration's plot as a matplotlib ``Figure`` (needs matplotlib): candidate and
    selected histograms side by side, target and comparator bars in each."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.2), layout="constrained")
    axes = fig.subplots(1, 2, sharey=False)
    centers = record["bin_centers"]
    width = (record["reward_max"] - record["reward_min"]) / record["num_bins"] / len(SERIES)
    for ax, section in zip(axes, ("candidate", "selected")):
        for s_idx, name in enumerate(SERIES):
            offset = (s_idx - (len(SERIES) - 1) / 2) * width
            ax.bar(
                [c + offset for c in centers],
                record[section][name]["counts"],
                width=width * 0.9,
                color=COLORS[name],
                alpha=0.85,
                label=name,
            )
        ax.set_title("all candidates" if section == "candidate" else "selected pairs")
        ax.set_xlim(record["reward_min"], record["reward_max"])
        ax.set_xlabel("raw reward")
        ax.legend(fontsize="small")
    axes[0].set_ylabel("count")
    fig.suptitle(f"Reward distribution, iteration {int(record['iteration'])}")
    return fig


_warned_no_png = False


def png_available() -> bool:
    """Whether matplotlib is installed, so PNG plots can be written (warns once when not)."""
    global _warned_no_png
    if importlib.util.find_spec("matplotlib") is not None:
        return True
    if not _warned_no_png:
        _warned_no_png = True
        warnings.warn(
            "log_reward_distribution: matplotlib is not installed, so the drift logger writes "
            "JSON and SVG but no PNG; install it with `pip install 'comlrl-core[plot]'`.",
            stacklevel=3,
        )
    return False


def write_iteration(directory: str, record: dict[str, Any]) -> tuple[str, ...]:
    """Write ``iteration_NNNN.json``, ``iteration_NNNN.svg`` and (with matplotlib)
    ``iteration_NNNN.png``; returns the paths written."""
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, f"iteration_{int(record['iteration']):04d}")
    for suffix, text in ((".json", json.dumps(record, indent=1)), (".svg", render_svg(record))):
        tmp = f"{stem}{suffix}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, stem + suffix)
    written = (stem + ".json", stem + ".svg")
    if png_available():
        written += (render_png(record, stem + ".png"),)
    return written


def html_plots(record: dict[str, Any]) -> dict[str, str]:
    """The iteration's histograms as SVG text under ``{ns}/iteration_NNNN/line_plot`` and
    ``.../bar_plot``, for the sinks that show figures (W&B)."""
    it = int(record["iteration"])
    out = {}
    for section, ns in (
        ("candidate", "iter/reward_distribution"),
        ("selected", "iter/selected_reward_distribution"),
    ):
        for kind in ("line", "bar"):
            out[f"{ns}/iteration_{it:04d}/{kind}_plot"] = histogram_svg(record, section, kind)
    return out
