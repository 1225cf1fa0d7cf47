"""The performance guard: this checkout against a base commit, interleaved, pass or fail.

    uv run --frozen python -m benchmarks guard                      # against main, a few minutes
    uv run --frozen python -m benchmarks guard --base HEAD~3 --repeats 5

Our trainer runs the guarded workloads (``magrpo_random`` on the tiny and small models by
default: random-init agents, so every row decodes its full length, and the decoding, scoring
and update paths all count) at the base commit and at this working tree, alternating which goes
first, ``--repeats`` times each (process CPU time, one torch thread; each revision from its own
checkout, see :mod:`benchmarks.revisions`). For each workload and size the run-to-run spread of
each revision is measured as (slowest - fastest) / median of its runs, and the guard fails when
this tree's median env-steps/s is below the base's by more than the larger of the two spreads:
a slowdown the noise of this very run cannot explain. Exit status 1 on a failure, 0 otherwise;
the JSON goes to ``benchmarks/results/guard-<base>.json``.

Run it before merging a change to the rollout, log-prob or update path (docs/performance.md,
"Guarding the numbers"). Timing stays out of the test suite: this is the place for it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

from benchmarks import revisions, runner
from benchmarks.workloads import SIZES, WORKLOADS

GUARDED = ("magrpo_random",)


def spread(rates: list[float]) -> float:
    """(fastest - slowest) / median of one revision's runs: 0 for a single run."""
    return (max(rates) - min(rates)) / statistics.median(rates) if len(rates) > 1 else 0.0


def verdict(base: list[float], here: list[float]) -> dict:
    """Whether ``here``'s runs are slower than ``base``'s by more than their spread.

    ``slowdown`` is 1 - median(here) / median(base) (negative: faster); ``allowed`` is the
    larger spread of the two revisions; ``ok`` is ``slowdown <= allowed``.
    """
    if not base or not here:
        raise ValueError("verdict needs at least one run at each revision")
    slowdown = 1.0 - statistics.median(here) / statistics.median(base)
    allowed = max(spread(base), spread(here))
    return {
        "median_base": statistics.median(base),
        "median_here": statistics.median(here),
        "slowdown": slowdown,
        "allowed": allowed,
        "ok": slowdown <= allowed,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks guard", description=__doc__.splitlines()[0]
    )
    p.add_argument("--base", default="main", help="the commit to compare against (git rev)")
    p.add_argument("--workloads", nargs="+", default=list(GUARDED), choices=sorted(WORKLOADS))
    p.add_argument("--sizes", nargs="+", default=list(SIZES), choices=SIZES)
    p.add_argument("--repeats", type=int, default=3, help="runs per revision (at least 2)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    p.add_argument("--out", type=Path, default=runner.ROOT / "benchmarks" / "results")
    args = p.parse_args(argv)
    if args.repeats < 2:
        p.error("--repeats must be at least 2: the spread needs two runs per revision")
    base = revisions.checkout_of(args.base)
    print(runner.machine_line())
    records = []
    for name in args.workloads:
        for size in args.sizes:
            # Named after its algorithm in the spec, which every revision's side can build
            # (an older checkout does not know this workload's name).
            workload = dataclasses.replace(WORKLOADS[name], name=WORKLOADS[name].algorithm)
            rec = revisions.compare(workload, size, base, ("ours",), args.repeats, args)
            rec["workload"] = name
            rec.update(verdict(rec["rates"]["ours@base"], rec["rates"]["ours@here"]))
            records.append(rec)
    out = {
        "base": args.base,
        "records": records,
        "machine": runner.machine(),
        "timestamp": time.strftime("%FT%T"),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"guard-{args.base.replace('/', '_').replace('~', '-')}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(
        "\n| workload | model | base env-steps/s | here | slowdown | allowed (spread) | verdict |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in records:
        print(
            f"| {r['workload']} | {r['size']} | {r['median_base']:.2f} | {r['median_here']:.2f} "
            f"| {r['slowdown']:+.1%} | {r['allowed']:.1%} | {'ok' if r['ok'] else 'SLOWER'} |"
        )
    failed = [f"{r['workload']}/{r['size']}" for r in records if not r["ok"]]
    if failed:
        print(f"[guard] slower than {args.base} beyond the run-to-run spread: {', '.join(failed)}")
        return 1
    print(f"[guard] no workload slower than {args.base} beyond its run-to-run spread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
