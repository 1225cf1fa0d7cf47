"""Command line of the learning benchmark.

    uv run --frozen python -m benchmarks.learning                      # everything, 2 workers
    uv run --frozen python -m benchmarks.learning --runs magrpo madpo --seeds 0 --tasks length_ratio
    uv run --frozen python -m benchmarks.learning --list               # the catalogue
    uv run --frozen python -m benchmarks.learning table                # docs/learning.md from the results
    uv run --frozen python -m benchmarks.learning check                # re-run a subset, compare

Each finished run appends one JSON line to the results file and prints a progress line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from benchmarks.learning import catalogue, check, runner, table

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(REPO, "benchmarks", "results", "learning.jsonl")
# Every row runs on these seeds: the table reads their mean, min and max, never one seed.
SEEDS = (0, 1, 2, 3)
# The code task scores 0 for every run, the untrained agents included (docs/learning.md), so
# the full run gives it fewer seeds to stay within its time budget.
CODE_SEEDS = (0, 1)
DOCS = os.path.join(REPO, "docs", "learning.md")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.learning", description=__doc__.split("\n")[0]
    )
    p.add_argument("command", nargs="?", choices=["run", "table", "check"], default="run")
    p.add_argument("--runs", nargs="+", default=None, help="run names (see --list); default all")
    p.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        default=None,
        help=f"default: {' '.join(map(str, SEEDS))} (the code task: "
        f"{' '.join(map(str, CODE_SEEDS))}; check: {' '.join(map(str, catalogue.CHECK_SEEDS))})",
    )
    p.add_argument("--tasks", nargs="+", default=None, choices=catalogue.ALL_TASKS)
    p.add_argument("--workers", type=int, default=2, help="parallel worker processes")
    p.add_argument("--results", default=RESULTS, help="the JSONL results file (appended to)")
    p.add_argument("--docs", default=DOCS, help="the page whose generated block `table` rewrites")
    p.add_argument("--max-steps", type=int, default=None, help="cap optimizer steps (checks only)")
    p.add_argument("--list", action="store_true", help="print the catalogue and exit")
    p.add_argument(
        "--margin",
        type=float,
        default=check.MARGIN,
        help=f"check: how far outside the published min–max a value may fall (default {check.MARGIN})",
    )
    p.add_argument(
        "--check-results", default=None, help="check: also keep the re-run's lines in this file"
    )
    return p


def write_docs(results_path: str, docs_path: str) -> str:
    """Rewrite the generated block of ``docs_path`` from ``results_path``; return the block."""
    block = table.render(table.read_results(results_path))
    with open(docs_path) as fh:
        page = fh.read()
    with open(docs_path, "w") as fh:
        fh.write(table.replace_block(page, block))
    return block


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or ``table``); see the module docstring."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.list:
        from benchmarks.learning.runfile import defaults_section

        for spec in catalogue.RUNS:
            tasks = ",".join(spec.tasks())
            source = f" (examples/{spec.example} when it is the demo)" if spec.example else ""
            section = spec.section
            if spec.kind == catalogue.DEFAULTS:
                section = defaults_section(spec.algorithm)
                source = f" (the {spec.same_as} row)" if spec.same_as else " (the rest: defaults)"
            print(
                f"{spec.name} [{spec.kind}; {spec.algorithm}; {tasks}]{source}: {json.dumps(section)}"
            )
        return 0
    if args.command == "table":
        print(write_docs(args.results, args.docs))
        return 0
    if args.workers < 1:
        raise SystemExit(f"--workers must be at least 1, got {args.workers}.")
    if args.command == "check":
        return check.run_check(
            args.results,
            args.workers,
            args.margin,
            runs=args.runs or catalogue.CHECK_RUNS,
            seeds=args.seeds or catalogue.CHECK_SEEDS,
            out_path=args.check_results,
        )
    try:
        specs = catalogue.select(args.runs)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    if args.seeds:
        jobs = runner.jobs(specs, args.seeds, args.tasks)
    else:
        jobs = runner.default_jobs(specs, SEEDS, CODE_SEEDS, args.tasks)
    command = " ".join(["python -m benchmarks.learning", *argv])
    runner.run_all(jobs, args.results, args.workers, command, args.max_steps)
    full = args.runs is None and args.seeds is None and args.tasks is None
    if full and args.max_steps is None and os.path.abspath(args.results) == RESULTS:
        write_docs(args.results, args.docs)
        print(f"rewrote the table of {os.path.relpath(args.docs, REPO)}")
    else:
        print(
            f"a subset ran: `python -m benchmarks.learning table` rewrites {os.path.relpath(args.docs, REPO)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
