"""Command line of the scaling benchmark.

    uv run --frozen python -m benchmarks.scaling                  # every point, both sides
    uv run --frozen python -m benchmarks.scaling list             # the points and what they run
    uv run --frozen python -m benchmarks.scaling --points n2-k4-t1-aligned-64 --sides ours
    uv run --frozen python -m benchmarks.scaling table            # re-render from the JSON
    uv run --frozen python -m benchmarks.scaling plot             # re-draw the PNG

Each side of each point runs in a fresh process (benchmarks.runner.run_side), repeats are
interleaved, and the median counts. The JSON keeps every run's raw numbers and the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.scaling import points as pts
from benchmarks.scaling import report

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "scaling.json"
DEFAULT_PNG = ROOT / "docs" / "img" / "scaling.png"
SCALING_SIDES = ("reference", "ours")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.scaling", description=__doc__.splitlines()[0]
    )
    p.add_argument("command", nargs="?", default="run", choices=("run", "list", "table", "plot"))
    p.add_argument("--points", nargs="+", default=None, help="point keys (default: all)")
    p.add_argument("--sides", nargs="+", choices=SCALING_SIDES, default=list(SCALING_SIDES))
    p.add_argument("--repeats", type=int, default=1, help="interleaved runs per side (median)")
    p.add_argument("--device", default="cpu", help="cpu (default), auto, cuda, ...")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default 1 on CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per side run")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the results JSON")
    p.add_argument("--png", type=Path, default=DEFAULT_PNG, help="the plot (run and plot)")
    return p


def run(args, log=print) -> dict:
    """Run the chosen points on the chosen sides; write the JSON after each point."""
    from benchmarks import runner
    from benchmarks.portable.measure import resolve_device
    from comlrl.core.testing import tiny_model_dir

    if args.repeats < 1:
        raise ValueError(f"--repeats must be at least 1, got {args.repeats}")
    chosen = pts.select(pts.all_points(), args.points)
    device = resolve_device(args.device)
    on_cpu = device == "cpu"
    threads = args.threads if args.threads is not None else (1 if on_cpu else None)
    clock = "cpu" if on_cpu else "wall"
    sides = tuple(s for s in SCALING_SIDES if s in args.sides)
    ref_python = None
    if "reference" in sides:
        from benchmarks.refvenv import reference_python

        ref_python = reference_python()
    model_dir = tiny_model_dir(size="tiny")
    results = {
        "command": "python -m benchmarks.scaling " + " ".join(args.argv),
        "device": device,
        "clock": clock,
        "repeats": args.repeats,
        "machine": runner.machine(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "points": [],
    }
    started = time.time()
    for point in chosen:
        spec = point.spec(model_dir=model_dir, device=device, threads=threads, seed=args.seed)
        runs: dict[str, list[dict]] = {s: [] for s in sides}
        for rep in range(args.repeats):
            order = sides[rep % len(sides) :] + sides[: rep % len(sides)]
            for side in order:
                res = runner.run_side(side, spec, ref_python, args.timeout)
                runs[side].append(res)
                key = "cpu_seconds" if clock == "cpu" else "seconds"
                log(
                    f"  {point.key:22s} {side:9s} run {rep + 1}: {res['env_steps']} env steps, "
                    f"{res['env_steps'] / res[key]:7.2f}/s ({clock}), {res['seconds']:6.1f} s wall, "
                    f"peak RSS {res['peak_rss_mib']:.0f} MiB"
                )
        summary = {side: runner.summarize(r, clock) for side, r in runs.items()}
        results["points"].append(
            dict(
                key=point.key,
                settings=point.settings,
                sweeps=list(point.sweeps),
                items=point.items,
                epochs=point.epochs,
                warmup_items=point.warmup_items,
                expected_env_steps=point.env_steps,
                spec=spec,
                sides=summary,
                ratios=runner.ratios("scaling", "tiny", summary),
            )
        )
        results["elapsed_s"] = time.time() - started
        _save(results, args.out)
    return results


def _save(results: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    args.argv = argv
    if args.command == "list":
        for p in pts.select(pts.all_points(), args.points):
            print(
                f"{p.key:22s} {report.describe(p.settings):22s} items {p.items}, epochs "
                f"{p.epochs}, warm-up items {p.warmup_items}, env steps {p.env_steps} "
                f"| sweeps: {', '.join(p.sweeps)}"
            )
        return 0
    if args.command in ("table", "plot"):
        if not args.out.exists():
            raise SystemExit(f"--out: no results file at {args.out}; run the benchmark first")
        results = json.loads(args.out.read_text())
        if args.command == "table":
            print(report.table(results), end="")
        else:
            print(f"[scaling] wrote {report.plot(results, args.png)}")
        return 0
    results = run(args)
    print()
    print(report.table(results), end="")
    print(f"[scaling] results: {args.out}; plot: {report.plot(results, args.png)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
