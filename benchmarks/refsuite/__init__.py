"""``python -m benchmarks refsuite``: the reference package's own test suite, run against us.

Downloads the ``comlrl==1.4.3`` sdist at run time (never committed), runs its ``tests/`` with
this environment's interpreter, so they import our ``comlrl``, and sorts each test into public-API
or internal with ``classification.json``. Prints the public pass rate and writes
``benchmarks/results/refsuite.json``. Exits 1 when a public-API test fails without a documented
deviation, or a public test module does not import. Reference internals that test modules import
at import time are installed as stand-ins, so those modules' tests are classified one by one;
``--classify`` rewrites those entries.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from benchmarks.refsuite.classify import (
    load_classification,
    report_lines,
    summarize,
    with_per_test_entries,
)
from benchmarks.refsuite.fetch import (
    REFERENCE,
    FetchError,
    default_cache_dir,
    download_sdist,
    unpack_tests,
)
from benchmarks.refsuite.percase import PER_TEST_FILES, entries
from benchmarks.refsuite.runner import run_tests

RESULT = Path(__file__).resolve().parents[1] / "results" / "refsuite.json"
# Where --classify writes (a module attribute, so a test can point it elsewhere).
CLASSIFICATION_FILE = Path(__file__).with_name("classification.json")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks refsuite", description=__doc__.splitlines()[0]
    )
    p.add_argument("--sdist", type=Path, help="a local comlrl-1.4.3.tar.gz instead of downloading")
    p.add_argument("--cache-dir", type=Path, default=None, help="where the sdist is kept")
    p.add_argument("--workers", type=int, default=0, help="pytest-xdist workers (0: in-process)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds for the whole suite")
    p.add_argument("--out", type=Path, default=RESULT, help="the JSON results file")
    p.add_argument(
        "--classify",
        action="store_true",
        help=f"run only {PER_TEST_FILES}, classify each of their tests (public or internal) and "
        "rewrite those entries of classification.json",
    )
    return p


def _classify(classification: dict, tests_dir: Path, workers: int, timeout: float) -> int:
    """``--classify``: the per-test entries of the modules that need stand-ins, rewritten."""
    only = sorted(p.name for p in tests_dir.glob(PER_TEST_FILES))
    stubs = classification.get("stubs")
    outcomes, timed_out = run_tests(tests_dir, workers, timeout, only=only, stubs=stubs)
    if timed_out:
        print(f"[refsuite] --classify stopped after {timeout:.0f} s; nothing written")
        return 1
    new = entries(outcomes, tests_dir)
    data = with_per_test_entries(classification, new)
    CLASSIFICATION_FILE.write_text(json.dumps(data, indent=2) + "\n")
    public = len(outcomes) - sum(
        any(t == e["id"] or t.startswith(e["id"] + "[") for e in new) for t in outcomes
    )
    print(
        f"[refsuite] {len(outcomes)} tests in {len(only)} modules: {public} public, "
        f"{len(outcomes) - public} internal ({len(new)} entries) -> {CLASSIFICATION_FILE}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = _parser().parse_args(argv)
    classification = load_classification()
    try:
        sdist = args.sdist or download_sdist(args.cache_dir or default_cache_dir())
        with tempfile.TemporaryDirectory(prefix="comlrl-refsuite-") as tmp:
            tests_dir = unpack_tests(sdist, Path(tmp))
            if args.classify:
                return _classify(classification, tests_dir, args.workers, args.timeout)
            started = time.perf_counter()
            outcomes, timed_out = run_tests(
                tests_dir,
                workers=args.workers,
                timeout=args.timeout,
                stubs=classification.get("stubs"),
            )
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
