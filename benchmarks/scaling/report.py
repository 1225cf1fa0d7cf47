"""The scaling results as a markdown table and a PNG, rendered from the saved JSON alone."""

from __future__ import annotations

from pathlib import Path

from benchmarks.scaling.points import BASE, SWEEPS, point_key


def describe(settings: dict) -> str:
    """What a point changes relative to the base point, in a few words."""
    if point_key(settings) == point_key(BASE):
        return "base"
    parts = []
    if settings["joint_mode"] != BASE["joint_mode"]:
        parts.append(settings["joint_mode"])
    labels = {"num_agents": "N", "num_generations": "K", "num_turns": "T"}
    for name, label in labels.items():
        if settings[name] != BASE[name]:
            parts.append(f"{label}={settings[name]}")
    if settings["max_new_tokens"] != BASE["max_new_tokens"]:
        parts.append(f"{settings['max_new_tokens']} tokens")
    if settings["joint_mode"] == "cross" and settings["num_turns"] == 1:
        parts.append("T=1")
    return ", ".join(parts)


def _rate(sides: dict, side: str, key: str) -> str:
    return f"{sides[side][key]:.1f}" if side in sides else "–"


def _env_steps(record: dict) -> str:
    for side in ("ours", "reference"):
        runs = record["sides"].get(side, {}).get("runs")
        if runs:
            return str(runs[0]["env_steps"])
    return str(record["expected_env_steps"])


def table(results: dict) -> str:
    """One row per point: env steps, each side's env-steps/s and tokens/s, the speed-up and
    the peak RSS of both sides (rates on the run's clock)."""
    head = (
        "| point | varies | items x epochs | env steps | reference env-steps/s | ours env-steps/s "
        "| reference tokens/s | ours tokens/s | speed-up (env-steps) | speed-up (tokens/s) "
        "| peak RSS ours / ref (MiB) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for rec in results["points"]:
        s, r = rec["sides"], rec.get("ratios", {})
        rss = (
            f"{s['ours']['peak_rss_mib']:.0f} / {s['reference']['peak_rss_mib']:.0f}"
            if "ours" in s and "reference" in s
            else "–"
        )
        speed = f"{r['speedup_env_steps']:.2f}x" if "speedup_env_steps" in r else "–"
        speed_tok = f"{r['speedup_tokens']:.2f}x" if "speedup_tokens" in r else "–"
        rows.append(
            f"| `{rec['key']}` | {describe(rec['settings'])} | {rec['items']} x {rec['epochs']} "
            f"| {_env_steps(rec)} | {_rate(s, 'reference', 'env_steps_per_s')} "
            f"| {_rate(s, 'ours', 'env_steps_per_s')} | {_rate(s, 'reference', 'tokens_per_s')} "
            f"| {_rate(s, 'ours', 'tokens_per_s')} | {speed} | {speed_tok} | {rss} |"
        )
    return head + "\n".join(rows) + "\n"


def series(results: dict) -> list[dict]:
    """Per sweep: the factor values and, per side, milliseconds per env step and the speed-up
    (points the results lack are left out of their sweep)."""
    by_key = {rec["key"]: rec for rec in results["points"]}
    out = []
    for sweep in SWEEPS:
        xs, cost, speedup = [], {"ours": [], "reference": []}, []
        for settings in sweep.settings():
            rec = by_key.get(point_key(settings))
            if rec is None or not rec["sides"]:
                continue
            xs.append(settings[sweep.factor])
            for side in cost:
                rate = rec["sides"].get(side, {}).get("env_steps_per_s")
                cost[side].append(1000.0 / rate if rate else None)
            speedup.append(rec.get("ratios", {}).get("speedup_env_steps"))
        if xs:
            out.append(
                dict(sweep=sweep.name, factor=sweep.factor, x=xs, cost=cost, speedup=speedup)
            )
    return out


def plot(results: dict, path: Path) -> Path:
    """Write the PNG: per sweep, cost per env step of both sides (top) and the speed-up
    (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    data = series(results)
    if not data:
        raise ValueError("plot: the results hold no point with measured sides")
    clock = results.get("clock", "cpu")
    fig, axes = plt.subplots(2, len(data), figsize=(3.2 * len(data), 5.6), squeeze=False)
    for col, sw in enumerate(data):
        top, bottom = axes[0][col], axes[1][col]
        for side, style in (("reference", "o--"), ("ours", "s-")):
            pts = [(x, y) for x, y in zip(sw["x"], sw["cost"][side]) if y is not None]
            if pts:
                top.plot(*zip(*pts), style, label=side)
        top.set_title(sw["sweep"], fontsize=9)
        top.set_yscale("log")
        top.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        top.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        top.yaxis.set_minor_formatter(NullFormatter())
        top.set_xticks(sw["x"])
        top.grid(True, alpha=0.3)
        pts = [(x, y) for x, y in zip(sw["x"], sw["speedup"]) if y is not None]
        if pts:
            bottom.plot(*zip(*pts), "s-", color="tab:green")
        bottom.axhline(1.0, color="grey", linewidth=0.8)
        bottom.set_xticks(sw["x"])
        bottom.set_xlabel(sw["factor"], fontsize=8)
        bottom.set_ylim(bottom=0)
        bottom.grid(True, alpha=0.3)
        if col == 0:
            top.set_ylabel(f"ms ({clock} time) per env step", fontsize=8)
            bottom.set_ylabel("speed-up over reference", fontsize=8)
            top.legend(fontsize=8)
    fig.suptitle("MAGRPO scaling, tiny model: one factor at a time around N=2, K=4, T=1, 64 tokens")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
