"""Our trainer at two revisions of this repository, interleaved in one run.

The overhead ratio against the bare bound moves with the machine (another VM, other neighbours),
so "did this change make the trainer slower?" is answered by running the same workload at both
revisions, alternating, on the same machine in the same minutes. Each revision runs from its own
checkout (a git worktree under ``~/.cache/comlrl/bench-revisions``, created on first use, with
its own ``uv sync --frozen`` environment) and so uses its own trainer and its own bare bound.

Usage::

    uv run --frozen python -m benchmarks.revisions --base 90d469d magrpo iac --sizes tiny
    uv run --frozen python -m benchmarks.revisions --base main~5 all --sides ours --repeats 5

It prints, per workload and size, the median env-steps/s (process CPU time) of each side at
the base and at the working tree, the ratio base/here (above 1: this tree is slower), and each
revision's overhead ratio ours/bare. Results go to ``benchmarks/results/revisions-*.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import runner
from benchmarks.workloads import WORKLOADS

CACHE = Path.home() / ".cache" / "comlrl" / "bench-revisions"


def checkout_of(rev: str) -> Path:
    """A ready checkout of ``rev`` (a worktree with a synced ``.venv``), created once."""
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=runner.ROOT,
        capture_output=True,
        text=True,
    )
    if sha.returncode != 0:
        raise SystemExit(f"--base {rev!r} is not a commit of this repository: {sha.stderr.strip()}")
    path = CACHE / sha.stdout.strip()[:12]
    if not (path / ".git").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["git", "worktree", "add", "--detach", "--force", str(path), sha.stdout.strip()],
            cwd=runner.ROOT,
            check=True,
        )
    if not (path / ".venv" / "bin" / "python").exists():
        subprocess.run(["uv", "sync", "--frozen"], cwd=path, check=True)
    return path


def _rate(result: dict) -> float:
    return result["env_steps"] / result["cpu_seconds"]


def compare(workload, size: str, base: Path, sides: tuple, repeats: int, args) -> dict:
    """Alternate every side at both revisions ``repeats`` times; medians and ratios."""
    spec = runner.build_spec(workload, size, device="cpu", threads=args.threads, seed=args.seed)
    trees = {"base": base, "here": runner.ROOT}
    rates: dict[str, list[float]] = {f"{s}@{t}": [] for s in sides for t in trees}
    for rep in range(repeats):
        order = list(trees.items()) if rep % 2 == 0 else list(trees.items())[::-1]
        for side in sides:
            for name, tree in order:
                result = runner.run_side(side, spec, None, args.timeout, checkout=tree)
                rates[f"{side}@{name}"].append(_rate(result))
                print(f"  {workload.name}/{size} {side}@{name} run {rep + 1}: {_rate(result):.2f}")
    medians = {key: statistics.median(v) for key, v in rates.items()}
    out = {"workload": workload.name, "size": size, "rates": rates, "medians": medians}
    for side in sides:
        out[f"{side}_base_over_here"] = medians[f"{side}@base"] / medians[f"{side}@here"]
    if {"ours", "bare"} <= set(sides):
        for name in trees:
            out[f"overhead@{name}"] = medians[f"bare@{name}"] / medians[f"ours@{name}"]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workloads", nargs="+", help="workload names, or all")
    p.add_argument("--base", required=True, help="the revision to compare against (git rev)")
    p.add_argument("--sizes", nargs="+", default=["tiny"], choices=("tiny", "small"))
    p.add_argument("--sides", nargs="+", default=["ours", "bare"], choices=("ours", "bare"))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--out", type=Path, default=runner.ROOT / "benchmarks" / "results")
    args = p.parse_args(argv)
    names = list(WORKLOADS) if args.workloads == ["all"] else args.workloads
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        p.error(f"unknown workload(s) {unknown}; choose from {sorted(WORKLOADS)} or all")
    base = checkout_of(args.base)
    records = []
    for name in names:
        for size in args.sizes:
            rec = compare(WORKLOADS[name], size, base, tuple(args.sides), args.repeats, args)
            rec.update(base=args.base, machine=runner.machine(), timestamp=time.strftime("%FT%T"))
            records.append(rec)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"revisions-{args.base.replace('/', '_')}.json").write_text(
        json.dumps(records, indent=2) + "\n"
    )
    print(
        "\n| workload | model | side | base env-steps/s | here | base / here | overhead base | here |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in records:
        for side in args.sides:
            m = r["medians"]
            ob = f"{r['overhead@base']:.2f}" if "overhead@base" in r else "–"
            oh = f"{r['overhead@here']:.2f}" if "overhead@here" in r else "–"
            print(
                f"| {r['workload']} | {r['size']} | {side} | {m[f'{side}@base']:.2f} | "
                f"{m[f'{side}@here']:.2f} | {r[f'{side}_base_over_here']:.3f} | {ob} | {oh} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
