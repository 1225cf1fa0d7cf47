"""Command line of the benchmark suite.

    uv run --frozen python -m benchmarks magrpo            # one workload, both model sizes
    uv run --frozen python -m benchmarks all --repeats 3   # every workload whose family is installed
    uv run --frozen python -m benchmarks list              # workloads and what can run here
    uv run --frozen python -m benchmarks table             # the table of the saved results
    uv run --frozen python -m benchmarks gpu               # the GPU check (benchmarks/gpu_check)
    uv run --frozen python -m benchmarks refsuite          # 1.4.3's own tests against us
    uv run --frozen python -m benchmarks realsize          # memory at real shapes (150k vocab)
    uv run --frozen python -m benchmarks guard --base main # slower than main? (pass/fail)

Results go to ``benchmarks/results/<workload>-<size>-<device>.json`` and a markdown table is
printed. See benchmarks/README.md for what each number means.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _parser() -> argparse.ArgumentParser:
    from benchmarks.runner import SIDES
    from benchmarks.workloads import SIZES, WORKLOADS

    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument("command", choices=[*WORKLOADS, "all", "list", "table"], help="workload to run")
    p.add_argument("--sizes", nargs="+", choices=SIZES, default=list(SIZES))
    p.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    p.add_argument("--repeats", type=int, default=1, help="interleaved runs per side (median)")
    p.add_argument("--device", default="auto", help="auto (a GPU when present), cpu, cuda, ...")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads per process (default: 1 on CPU, so CPU time measures the work)",
    )
    p.add_argument(
        "--clock",
        choices=("auto", "cpu", "wall"),
        default="auto",
        help="time base of the rates; auto: process CPU time on CPU, wall time on a GPU",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per side run")
    p.add_argument("--out", type=Path, default=RESULTS, help="directory for the JSON results")
    p.add_argument("--rebuild-reference", action="store_true", help="recreate .venv-ref")
    return p


def _installed(algorithm: str) -> bool:
    from comlrl.core.plugins import available_algorithms

    return algorithm in available_algorithms()


def _result_records(out: Path) -> list[dict]:
    """The workload results in ``out``: files named ``<workload>-<size>-<device>.json`` as the
    runner writes them (revision checks, scaling runs and other JSON there are left out)."""
    records = []
    for path in sorted(out.glob("*.json")):
        rec = json.loads(path.read_text())
        if not isinstance(rec, dict) or not {"workload", "size", "device", "sides"} <= set(rec):
            continue
        if path.name == f"{rec['workload']}-{rec['size']}-{rec['device']}.json":
            records.append(rec)
    return records


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["gpu"]:
        from benchmarks.gpu_check.run import main as gpu_main

        return gpu_main(argv[1:])
    if argv[:1] == ["guard"]:
        from benchmarks.guard import main as guard_main

        return guard_main(argv[1:])
    if argv[:1] == ["realsize"]:
        from benchmarks.realsize import main as realsize_main

        return realsize_main(argv[1:])
    if argv[:1] == ["adapters"]:
        from benchmarks.adapters import main as adapters_main

        return adapters_main(argv[1:])
    if argv[:1] == ["mixed_adapters"]:
        from benchmarks.mixed_adapters import main as mixed_main

        return mixed_main(argv[1:])
    if argv[:1] == ["refsuite"]:
        from benchmarks.refsuite import main as refsuite_main

        return refsuite_main(argv[1:])
    args = _parser().parse_args(argv)
    from benchmarks.portable.measure import resolve_device
    from benchmarks.workloads import SIZES, WORKLOADS

    if args.command == "list":
        for w in WORKLOADS.values():
            state = "installed" if _installed(w.algorithm) else "family not installed"
            print(f"{w.name:8s} {state:22s} {w.summary}")
        return 0
    from benchmarks import runner

    if args.command == "table":
        order = {name: i for i, name in enumerate(WORKLOADS)}
        records = _result_records(args.out)
        sizes = {name: i for i, name in enumerate(SIZES)}
        records.sort(
            key=lambda r: (order.get(r["workload"], 99), sizes.get(r["size"], 9), r["device"])
        )
        print(runner.table(records), end="")
        return 0
    if args.repeats < 1:
        raise SystemExit("--repeats must be at least 1")
    device = resolve_device(args.device)
    on_cpu = device == "cpu"
    threads = args.threads if args.threads is not None else (1 if on_cpu else None)
    clock = args.clock if args.clock != "auto" else ("cpu" if on_cpu else "wall")
    chosen = list(WORKLOADS.values()) if args.command == "all" else [WORKLOADS[args.command]]
    runnable, skipped = [], []
    for w in chosen:
        (runnable if _installed(w.algorithm) else skipped).append(w)
    for w in skipped:
        print(f"[benchmarks] skipping {w.name}: its algorithm family is not installed")
    ref_python = None
    if "reference" in args.sides:
        from benchmarks.refvenv import reference_python

        ref_python = reference_python(rebuild=args.rebuild_reference)
    args.out.mkdir(parents=True, exist_ok=True)
    print(runner.machine_line())
    records = []
    for w in runnable:
        for size in args.sizes:
            print(f"[benchmarks] {w.summary} | model {size} | {device} | clock {clock}")
            rec = runner.run_workload(
                w,
                size,
                sides=tuple(s for s in args.sides if s in w.sides),
                repeats=args.repeats,
                device=device,
                threads=threads,
                clock=clock,
                seed=args.seed,
                reference_python=ref_python,
                timeout=args.timeout,
            )
            rec["command"] = "python -m benchmarks " + " ".join(argv or sys.argv[1:])
            path = args.out / runner.result_name(w.name, size, device)
            path.write_text(json.dumps(rec, indent=2) + "\n")
            records.append(rec)
            print(json.dumps(rec["ratios"], indent=2))
    if records:
        print()
        print(runner.table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
