"""pytest plugin: append one JSON line per test outcome (and per failed collection) to the file
named by ``COMLRL_REFSUITE_RECORD``, as each finishes, so a run cut short still reports. Each
test's record lists the stand-ins of reference internals it used (``comlrl_refsuite_stubs``)."""

import json
import os

from comlrl_refsuite_stubs import TOUCHED

_PATH = os.environ.get("COMLRL_REFSUITE_RECORD")


def _write(record):
    if _PATH:
        with open(_PATH, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


def _message(report):
    text = str(report.longrepr or "")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("E ")]
    return (errors[0] if errors else (lines[-1] if lines else ""))[:300]


def pytest_runtest_logreport(report):
    # The call phase always; setup and teardown only when they did not pass (a skip marker
    # shows as a skipped setup, a broken fixture as an error).
    if report.when == "call" or not report.passed:
        outcome = report.outcome
        if report.when != "call" and report.failed:
            outcome = "error"
        _write(
            {
                "id": report.nodeid,
                "when": report.when,
                "outcome": outcome,
                "message": "" if report.passed else _message(report),
                # The reference internals (stand-ins) the test used so far.
                "stubs": list(TOUCHED),
            }
        )


def pytest_collectreport(report):
    if report.failed:
        _write(
            {
                "id": report.nodeid,
                "when": "collect",
                "outcome": "error",
                "message": _message(report),
            }
        )
