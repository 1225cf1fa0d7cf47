"""``python -m benchmarks refsuite``: the reference package's own test suite, run against us.

Downloads the ``comlrl==1.4.3`` sdist at run time (never committed), runs its ``tests/`` with
this environment's interpreter, so they import our ``comlrl``, and sorts each test into public-API
or internal with ``classification.json``. Prints the public pass rate and writes
``benchmarks/results/refsuite.json``. Exits 1 when a public-API test fails without a documented
deviation, or a public test module does not import.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from benchmarks.refsuite.classify import load_classification, report_lines, summarize
from benchmarks.refsuite.fetch import (
    REFERENCE,
    FetchError,
    default_cache_dir,
    download_sdist,
    unpack_tests,
)
from benchmarks.refsuite.runner import run_tests

RESULT = Path(__file__).resolve().parents[1] / "results" / "refsuite.json"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks refsuite", description=__doc__.splitlines()[0]
    )
    p.add_argument("--sdist", type=Path, help="a local comlrl-1.4.3.tar.gz instead of downloading")
    p.add_argument("--cache-dir", type=Path, default=None, help="where the sdist is kept")
    p.add_argument("--workers", type=int, default=0, help="pytest-xdist workers (0: in-process)")
    p.add_argument("--timeout", type=float, default=280.0, help="seconds for the whole suite")
    p.add_argument("--out", type=Path, default=RESULT, help="the JSON results file")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = _parser().parse_args(argv)
    classification = load_classification()
    try:
        sdist = args.sdist or download_sdist(args.cache_dir or default_cache_dir())
        with tempfile.TemporaryDirectory(prefix="comlrl-refsuite-") as tmp:
            tests_dir = unpack_tests(sdist, Path(tmp))
            started = time.perf_counter()
            outcomes, timed_out = run_tests(tests_dir, workers=args.workers, timeout=args.timeout)
            seconds = time.perf_counter() - started
    except FetchError as err:
        print(str(err), file=sys.stderr)
        return 2
    summary = summarize(outcomes, classification)
    record = {
        "reference": REFERENCE,
        "command": " ".join(["python -m benchmarks refsuite", *(argv or [])]),
        "seconds": round(seconds, 1),
        "timed_out": timed_out,
        "versions": {n: version(n) for n in ("comlrl-core", "torch", "transformers")},
        **summary,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"[refsuite] {REFERENCE} tests against this environment, {seconds:.0f} s")
    if timed_out:
        print(f"[refsuite] stopped after --timeout {args.timeout:.0f} s: the counts are partial")
    print("\n".join(report_lines(summary)))
    print(f"[refsuite] results: {args.out}")
    return 1 if summary["public"]["unexplained_failures"] or timed_out else 0
