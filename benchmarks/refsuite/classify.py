"""Which reference tests are public-API tests, and what a run's outcomes add up to.

The lists live in ``benchmarks/refsuite/classification.json``:

- ``internal``: tests that reach the reference's private internals (its checkpoint encoding,
  private helpers, exact internal records), which no replacement promises; each entry has a
  reason. Everything else is a public-API test.
- ``deviations``: public-API tests that fail here on purpose, each naming the documented
  deviation (docs/compatibility.md) it meets.
- ``stubs``: the reference internals that test modules import at import time, installed as
  stand-ins so those modules import (``plugin/comlrl_refsuite_stubs.py``); their tests are
  classified one by one (``percase.py``; those entries carry ``"per_test": true``). A public
  test that uses a stand-in counts as a failure to look at: the classification is stale.

An entry is a test id, or a prefix of one: a file (``test_x.py``), a test whose parametrized
cases all count (``test_x.py::test_y``) or a class.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

CLASSIFICATION = Path(__file__).with_name("classification.json")
# When one test yields several records (a call and a broken teardown), the worst one counts.
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def load_classification(path: Path = CLASSIFICATION) -> dict:
    """The classification file, checked: every entry has an id and a non-empty reason."""
    data = json.loads(Path(path).read_text())
    for entry in data.get("stubs", []):
        names = entry.get("names")
        if not entry.get("module") or not (names == "*" or isinstance(names, list)):
            raise ValueError(f"{path}: every 'stubs' entry needs a module and names (or '*').")
    for section in ("internal", "deviations"):
        entries = data.get(section)
        if not isinstance(entries, list):
            raise ValueError(f"{path}: '{section}' must be a list of {{id, reason}} entries.")
        for entry in entries:
            if not str(entry.get("id", "")).strip() or not str(entry.get("reason", "")).strip():
                raise ValueError(f"{path}: every '{section}' entry needs an id and a reason.")
    return data


def with_per_test_entries(data: Mapping, entries: list[dict]) -> dict:
    """``data`` with its ``per_test`` internal entries replaced by ``entries``."""
    kept = [e for e in data["internal"] if not e.get("per_test")]
    return {**data, "internal": kept + list(entries)}


def matches(test_id: str, entry: str) -> bool:
    """Whether ``entry`` names ``test_id``: the same id, or a file/test/class prefix of it.

    ``*`` in an entry matches any run of characters (``test_checkpoint_*.py``,
    ``test_x.py::test_policy_eval_*``); other characters, ``[`` included, match themselves.
    """
    entry = entry.rstrip(":")
    if "*" in entry:
        pattern = "".join(
            ".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", entry)
        )
        return re.fullmatch(pattern + r"(::.*|\[.*)?", test_id) is not None
    return test_id == entry or test_id.startswith((entry + "::", entry + "["))


def _strip_dir(test_id: str, prefix: str) -> str:
    # pytest ids are relative to its rootdir; keep them relative to the reference's tests/.
    return test_id[len(prefix) :] if prefix and test_id.startswith(prefix) else test_id


def merge_records(records: Iterable[Mapping], prefix: str = "") -> dict[str, dict]:
    """One outcome per test id (the worst of its records), ids made relative to ``prefix``."""
    merged: dict[str, dict] = {}
    for rec in records:
        test_id = _strip_dir(rec["id"], prefix)
        old = merged.get(test_id)
        if old is None or _RANK[rec["outcome"]] > _RANK[old["outcome"]]:
            merged[test_id] = {
                "outcome": rec["outcome"],
                "when": rec.get("when", "call"),
                "message": rec.get("message", ""),
                "stubs": list(rec.get("stubs", [])),
            }
    return merged


def _first(test_id: str, entries: list[dict]) -> dict | None:
    return next((e for e in entries if matches(test_id, e["id"])), None)


def summarize(outcomes: Mapping[str, Mapping], classification: Mapping) -> dict:
    """Counts per class and outcome, the public pass rate, and the public failures that no
    deviation entry explains (which the acceptance wants empty)."""
    internal, deviations = classification["internal"], classification["deviations"]
    tests: dict[str, dict] = {}
    collection_errors = []
    for test_id, result in sorted(outcomes.items()):
        if result.get("when") == "collect":
            # A module that does not import: its tests never ran, so none can be counted.
            entry = _first(test_id, internal)
            dev = None if entry else _first(test_id, deviations)
            collection_errors.append(
                {
                    "id": test_id,
                    "internal": entry is not None,
                    "deviation": dev["reason"] if dev else None,
                    "message": result["message"],
                }
            )
            continue
        entry = _first(test_id, internal)
        kind = "internal" if entry else "public"
        row = {"class": kind, "outcome": result["outcome"]}
        if kind == "public" and result.get("stubs"):
            # A public test needed a reference internal: the per-test classification is stale.
            row["deviation"] = None
            row["message"] = f"public, but used the stand-ins {result['stubs']} (run --classify)"
        elif kind == "public" and result["outcome"] in ("failed", "error"):
            dev = _first(test_id, deviations)
            row["deviation"] = dev["reason"] if dev else None
            row["message"] = result.get("message", "")
        tests[test_id] = row
    public = [r for r in tests.values() if r["class"] == "public"]
    passed = sum(r["outcome"] == "passed" for r in public)
    skipped = sum(r["outcome"] == "skipped" for r in public)
    ran = len(public) - skipped
    unexplained = sorted(
        t for t, r in tests.items() if r["class"] == "public" and r.get("deviation", 1) is None
    )
    unexplained += [c["id"] for c in collection_errors if not c["internal"] and not c["deviation"]]
    deviating = sorted(t for t, r in tests.items() if r.get("deviation"))
    deviating += [c["id"] for c in collection_errors if c["deviation"]]
    unused = [e["id"] for e in deviations if not any(matches(t, e["id"]) for t in deviating)]
    internal_rows = [r for r in tests.values() if r["class"] == "internal"]
    return {
        "totals": {
            "tests": len(tests),
            **{k: sum(r["outcome"] == k for r in tests.values()) for k in _RANK},
        },
        "public": {
            "tests": len(public),
            "passed": passed,
            "skipped": skipped,
            "pass_rate": round(passed / ran, 4) if ran else None,
            "documented_deviations": len(deviating),
            "unexplained_failures": unexplained,
        },
        "internal": {
            "tests": len(internal_rows),
            "passed": sum(r["outcome"] == "passed" for r in internal_rows),
            "entries": len(internal),
        },
        "collection_errors": collection_errors,
        "unused_deviation_entries": unused,
        "tests": tests,
    }


def report_lines(summary: Mapping) -> list[str]:
    """The human-readable report: one table and the failures to look at."""
    pub, tot, internal = summary["public"], summary["totals"], summary["internal"]
    rate = "n/a" if pub["pass_rate"] is None else f"{100 * pub['pass_rate']:.1f}%"
    lines = [
        "| tests | count | passed | pass rate |",
        "| --- | --- | --- | --- |",
        f"| public API | {pub['tests']} | {pub['passed']} | {rate} |",
        f"| internal ({internal['entries']} entries) | {internal['tests']} | {internal['passed']} | - |",
        f"| all | {tot['tests']} | {tot['passed']} | - |",
        "",
        f"modules that do not import: {len(summary['collection_errors'])} "
        f"({sum(c['internal'] for c in summary['collection_errors'])} internal)",
        f"public failures that are documented deviations: {pub['documented_deviations']}",
        f"public failures not explained: {len(pub['unexplained_failures'])}",
    ]
    for test_id in pub["unexplained_failures"]:
        msg = summary["tests"].get(test_id, {}).get("message") or next(
            (c["message"] for c in summary["collection_errors"] if c["id"] == test_id), ""
        )
        lines.append(f"  {test_id}: {msg}")
    for entry in summary["unused_deviation_entries"]:
        lines.append(f"deviation entry no longer needed (the test passes): {entry}")
    return lines
