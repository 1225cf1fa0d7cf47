"""The realsize matrix as a markdown table, a PNG, and the block of docs/performance.md."""

from __future__ import annotations

from pathlib import Path

from benchmarks.realsize.matrix import Cell, cells

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "performance.md"
TUTORIAL = ROOT / "docs" / "real_models.md"
PNG = ROOT / "docs" / "images" / "realsize.png"
START, END = "<!-- realsize-matrix:start -->", "<!-- realsize-matrix:end -->"
OPTIONS_START, OPTIONS_END = "<!-- realsize-options:start -->", "<!-- realsize-options:end -->"
OPTION_NAMES = {
    "fp32": "full fp32",
    "bf16": "`bf16: true`",
    "adapters": "one base + adapters",
    "sharing": "parameter sharing",
    "checkpointing": "gradient checkpointing",
}


def _seconds(record: dict, key: str) -> str:
    value = record.get(key)
    return "—" if value is None else f"{value:.1f}"


def _row(cell: Cell, record: dict | None) -> str:
    head = f"| {cell.name} |"
    if record is None:
        return head + " not measured | | | | | | |"
    if record["status"] != "measured":
        reason = record.get("reason", "").splitlines()[-1][:80] if record.get("reason") else ""
        return head + f" {record['status']}: {reason} | | | | | | |"
    return head + (
        f" {record['peak_rss_gb']:.2f} | {_seconds(record, 'train_seconds')} | "
        f"{_seconds(record, 'train_cpu_seconds')} | "
        f"{_seconds(record, 'decode_seconds')} | {_seconds(record, 'scoring_seconds')} | "
        f"{_seconds(record, 'backward_step_seconds')} | {_seconds(record, 'load_seconds')} |"
    )


def table(results: dict) -> str:
    """Every trainer cell, measured or not; times are seconds of the one-step ``train()``."""
    lines = [
        "| cell | peak RSS (GB) | train (s) | train CPU (s) | decode (s) | scoring (s) "
        "| backward+step (s) | load (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(cell, results.get(cell.name)) for cell in cells()]
    return "\n".join(lines) + "\n"


def _option_cell(record: dict | None) -> str:
    if record is None:
        return "not measured"
    if record["status"] == "does not fit":
        return f"does not fit (floor {record['floor_gb']:.1f} GB)"
    if record["status"] != "measured":
        return record["status"]
    return f"{record['peak_rss_gb']:.1f} GB, {record['train_seconds']:.0f} s"


def options_table(results: dict) -> str:
    """MAGRPO per agent count and memory option: peak RSS and the one-step time on this CPU,
    with the GPU column pending until the device check measures it."""
    from benchmarks.realsize.matrix import OPTIONS

    head = "| shape | agents | " + " | ".join(OPTION_NAMES[o] for o in OPTIONS) + " | GPU |"
    lines = [head, "|---|---|" + "---|" * (len(OPTIONS) + 1)]
    known = set(cells())
    for shape, label in (("qwen05", "Qwen2.5-0.5B"), ("qwen15", "Qwen2.5-1.5B")):
        counts = sorted({c.agents for c in known if c.shape == shape and c.side == "ours"})
        for n in counts:
            row = []
            for option in OPTIONS:
                cell = Cell(shape, "magrpo", n, option)
                row.append(_option_cell(results.get(cell.name)) if cell in known else "—")
            lines.append(f"| {label} | {n} | " + " | ".join(row) + " | pending |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path = PNG) -> Path:
    """Peak RSS of our qwen05 cells per algorithm, agents on the x axis, one bar per option."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.realsize.matrix import AGENTS, ALGORITHMS, OPTIONS

    fig, axes = plt.subplots(1, len(ALGORITHMS), figsize=(14, 4.2), sharey=True)
    width = 0.8 / len(OPTIONS)
    for ax, algo in zip(axes, ALGORITHMS):
        for j, option in enumerate(OPTIONS):
            xs, ys, missing = [], [], []
            for i, n in enumerate(AGENTS):
                record = results.get(Cell("qwen05", algo, n, option).name)
                x = i + (j - len(OPTIONS) / 2 + 0.5) * width
                if record and record["status"] == "measured":
                    xs.append(x)
                    ys.append(record["peak_rss_gb"])
                elif record and record["status"] == "does not fit":
                    missing.append(x)
            bars = ax.bar(xs, ys, width, label=option)
            color = bars.patches[0].get_facecolor() if bars.patches else None
            for x in missing:
                ax.bar(x, 24, width, color=color, alpha=0.25, hatch="//")
        ax.axhline(24, color="k", lw=0.8, ls="--")
        ax.set_xticks(range(len(AGENTS)), [f"N={n}" for n in AGENTS])
        ax.set_title(f"{algo.upper()} at the Qwen2.5-0.5B shape")
    axes[0].set_ylabel("peak RSS (GB); hatched: does not fit in 24 GB")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _replace_block(doc: Path, start: str, end: str, body: str, command: str) -> None:
    text = doc.read_text()
    if start not in text or end not in text:
        raise SystemExit(f"{doc} has no {start} ... {end} block")
    block = f"{start}\n<!-- generated by `{command}`; edit benchmarks/realsize/report.py -->\n\n"
    before, rest = text.split(start, 1)
    doc.write_text(before + block + body + end + rest.split(end, 1)[1])


def write_doc(results: dict, command: str, doc: Path = DOC, tutorial: Path = TUTORIAL) -> None:
    """Replace the generated blocks: the matrix and the PNG link in docs/performance.md, the
    per-option table in docs/real_models.md."""
    body = f"![Peak RSS per memory option](images/{PNG.name})\n\n{table(results)}"
    _replace_block(doc, START, END, body, command)
    _replace_block(tutorial, OPTIONS_START, OPTIONS_END, options_table(results), command)
