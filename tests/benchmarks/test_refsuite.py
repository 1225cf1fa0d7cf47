"""``python -m benchmarks refsuite`` on a fake tiny suite: classification, counting, the report
and the results file, and the one-line error when the package index is unreachable. No network."""

import io
import json
import subprocess
import tarfile

import pytest

from benchmarks import refsuite
from benchmarks.refsuite import fetch
from benchmarks.refsuite.classify import (
    CLASSIFICATION,
    load_classification,
    matches,
    merge_records,
    report_lines,
    summarize,
)

FAKE_TESTS = {
    "conftest.py": "import pytest\n\n@pytest.fixture\ndef broken():\n    raise RuntimeError('x')\n",
    "test_api.py": (
        "import pytest\n\n"
        "def test_ok():\n    assert True\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\n"
        "def test_param(n):\n    assert n == 1\n\n"
        "def test_needs_fixture(broken):\n    pass\n\n"
        "@pytest.mark.skip(reason='not here')\n"
        "def test_skipped():\n    pass\n"
    ),
    "test_private.py": "def test_reaches_inside():\n    assert False, 'private detail'\n",
    "test_unimportable.py": "import not_a_module_anywhere\n\ndef test_never():\n    pass\n",
}
CLASSES = {
    "internal": [{"id": "test_priv*.py", "reason": "reaches a private helper"}],
    "deviations": [
        {"id": "test_api.py::test_param", "reason": "a documented change"},
        {"id": "test_api.py::test_gone", "reason": "a stale entry"},
    ],
}


def _sdist(tmp_path, files=FAKE_TESTS):
    path = tmp_path / fetch.SDIST_NAME
    with tarfile.open(path, "w:gz") as tar:
        for name, text in {**files, "comlrl/__init__.py": "raise SystemExit('shadowed')\n"}.items():
            data = text.encode()
            where = name if name.startswith("comlrl/") else f"tests/{name}"
            info = tarfile.TarInfo(f"comlrl-1.4.3/{where}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_entries_match_ids_prefixes_and_globs():
    assert matches("test_a.py::test_b[1-x]", "test_a.py::test_b")
    assert matches("test_a.py::test_b", "test_a.py")
    assert not matches("test_a.py::test_bc", "test_a.py::test_b")
    assert matches("test_checkpoint_rng.py::test_x", "test_checkpoint_*.py")
    assert matches("test_x.py::test_policy_eval_mask[q]", "test_x.py::test_policy_eval_*")
    assert not matches("test_x.py::test_policy", "test_x.py::test_policy_eval_*")
    # Brackets in an entry are literal, not a glob character class.
    assert matches("test_x.py::test_y[a]", "test_x.py::test_y[a]")
    assert not matches("test_x.py::test_y[b]", "test_x.py::test_y[a]")


def test_worst_record_of_a_test_wins():
    merged = merge_records(
        [
            {"id": "t.py::a", "when": "call", "outcome": "passed"},
            {"id": "t.py::a", "when": "teardown", "outcome": "error", "message": "E boom"},
            {"id": "t.py::b", "when": "call", "outcome": "failed"},
            {"id": "t.py::b", "when": "call", "outcome": "failed"},
        ]
    )
    assert merged["t.py::a"]["outcome"] == "error"
    assert merged["t.py::b"]["outcome"] == "failed"


def test_fake_suite_is_run_classified_and_reported(tmp_path, monkeypatch, capsys):
    classes = tmp_path / "classes.json"
    classes.write_text(json.dumps(CLASSES))
    monkeypatch.setattr(refsuite, "load_classification", lambda: load_classification(classes))
    out = tmp_path / "refsuite.json"
    status = refsuite.main(
        ["--sdist", str(_sdist(tmp_path)), "--out", str(out), "--timeout", "120"]
    )
    rec = json.loads(out.read_text())
    tests = rec["tests"]
    assert tests["test_api.py::test_ok"] == {"class": "public", "outcome": "passed"}
    assert tests["test_api.py::test_param[2]"]["deviation"] == "a documented change"
    assert tests["test_api.py::test_needs_fixture"]["outcome"] == "error"
    assert tests["test_api.py::test_skipped"]["outcome"] == "skipped"
    assert tests["test_private.py::test_reaches_inside"]["class"] == "internal"
    # Public: ok, param[1], param[2], needs_fixture, skipped -> 2 of the 4 that ran passed.
    assert rec["public"]["tests"] == 5 and rec["public"]["passed"] == 2
    assert rec["public"]["pass_rate"] == 0.5
    assert rec["public"]["unexplained_failures"] == [
        "test_api.py::test_needs_fixture",
        "test_unimportable.py",
    ]
    assert [c["id"] for c in rec["collection_errors"]] == ["test_unimportable.py"]
    assert rec["unused_deviation_entries"] == ["test_api.py::test_gone"]
    assert rec["internal"] == {"tests": 1, "passed": 0, "entries": 1}
    assert status == 1
    printed = capsys.readouterr().out
    assert "| public API | 5 | 2 | 50.0% |" in printed
    assert "test_api.py::test_needs_fixture: " in printed
    assert "no longer needed (the test passes): test_api.py::test_gone" in printed


def test_all_public_failures_explained_exits_zero(tmp_path, monkeypatch):
    files = {"test_api.py": "def test_ok():\n    pass\n\ndef test_changed():\n    assert 0\n"}
    classes = tmp_path / "classes.json"
    dev = [{"id": "test_api.py::test_changed", "reason": "a documented change"}]
    classes.write_text(json.dumps({"internal": [], "deviations": dev}))
    monkeypatch.setattr(refsuite, "load_classification", lambda: load_classification(classes))
    out = tmp_path / "r.json"
    assert refsuite.main(["--sdist", str(_sdist(tmp_path, files)), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["public"]["documented_deviations"] == 1


def test_unreachable_index_gives_one_line(tmp_path, monkeypatch, capsys):
    def fail(cmd, **kwargs):
        msg = "WARNING: retrying\nERROR: Could not find a version that satisfies comlrl==1.4.3\n"
        return subprocess.CompletedProcess(cmd, 1, "", msg)

    monkeypatch.setattr(fetch.subprocess, "run", fail)
    monkeypatch.setattr(fetch, "_pip_command", lambda: ["pip"])
    status = refsuite.main(["--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err
    assert err.startswith("refsuite: could not download comlrl==1.4.3")
    assert "Could not find a version" in err and "--sdist PATH" in err
    assert not (tmp_path / "o").exists()


def test_a_cached_sdist_is_reused_without_pip(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / fetch.SDIST_NAME).write_bytes(b"")
    monkeypatch.setattr(fetch, "_pip_command", lambda: pytest.fail("pip was called"))
    assert fetch.download_sdist(cache) == cache / fetch.SDIST_NAME


def test_the_reference_package_itself_is_not_unpacked(tmp_path):
    tests = fetch.unpack_tests(_sdist(tmp_path), tmp_path / "run")
    assert (tests / "test_api.py").exists()
    assert not (tmp_path / "run" / "comlrl").exists()


def test_the_repository_classification_is_well_formed():
    data = load_classification(CLASSIFICATION)
    ids = [e["id"] for e in data["internal"] + data["deviations"]]
    assert len(ids) == len(set(ids))
    # The modules that import 1.4.3's checkpoint internals are classified test by test.
    assert not any(e["id"] == "test_checkpoint_*.py" for e in data["internal"])
    per_test = [e for e in data["internal"] if e.get("per_test")]
    assert per_test and all(e["id"].startswith("test_checkpoint_") for e in per_test)
    assert {s["module"] for s in data["stubs"]} >= {"comlrl.utils.checkpoint"}
    summary = summarize({}, data)
    assert report_lines(summary)[2].startswith("| public API | 0 |")


STUBBED = {
    "helpers.py": "def build():\n    import comlrl\n    return comlrl\n",
    "test_checkpoint_fake.py": (
        "from comlrl.utils.checkpoint import capture_trainer_state\n"
        "from comlrl.trainers.preference.checkpointing import resume_pairs\n"
        "from helpers import build\n\n"
        "class Tiny(capture_trainer_state):\n    pass\n\n"
        "def test_public():\n    assert build().__name__ == 'comlrl'\n\n"
        "def test_uses_a_stand_in():\n    capture_trainer_state(None)\n\n"
        "def test_builds_on_a_stand_in():\n    Tiny()\n\n"
        "def test_reads_a_private_name():\n    assert build()._not_there\n"
    ),
}
STUBS = [
    {"module": "comlrl.utils.checkpoint", "names": ["capture_trainer_state"], "reason": "x"},
    {"module": "comlrl.trainers.preference.checkpointing", "names": "*", "reason": "y"},
]


def test_modules_importing_internals_run_with_stand_ins_and_classify_per_test(
    tmp_path, monkeypatch, capsys
):
    classes = tmp_path / "classes.json"
    classes.write_text(json.dumps({"stubs": STUBS, "internal": [], "deviations": []}))
    monkeypatch.setattr(refsuite, "load_classification", lambda: load_classification(classes))
    monkeypatch.setattr(refsuite, "CLASSIFICATION_FILE", classes)
    sdist = str(_sdist(tmp_path, STUBBED))
    assert refsuite.main(["--sdist", sdist, "--classify", "--timeout", "120"]) == 0
    assert "4 tests in 1 modules: 1 public, 3 internal (3 entries)" in capsys.readouterr().out
    written = load_classification(classes)
    reasons = {e["id"]: e["reason"] for e in written["internal"]}
    assert reasons == {
        "test_checkpoint_fake.py::test_builds_on_a_stand_in": (
            "uses 1.4.3's comlrl.utils.checkpoint.capture_trainer_state"
        ),
        "test_checkpoint_fake.py::test_reads_a_private_name": "uses private _not_there",
        "test_checkpoint_fake.py::test_uses_a_stand_in": (
            "uses 1.4.3's comlrl.utils.checkpoint.capture_trainer_state"
        ),
    }
    # The full run counts the public test, and the internal ones as internal.
    out = tmp_path / "r.json"
    assert refsuite.main(["--sdist", sdist, "--out", str(out), "--timeout", "120"]) == 0
    rec = json.loads(out.read_text())
    assert rec["public"]["tests"] == 1 and rec["public"]["passed"] == 1
    assert rec["internal"]["tests"] == 3 and rec["collection_errors"] == []


def test_a_public_test_that_uses_a_stand_in_is_a_failure_to_look_at():
    outcomes = {"t.py::a": {"outcome": "passed", "stubs": ["comlrl.utils.checkpoint.x"]}}
    summary = summarize(outcomes, {"internal": [], "deviations": []})
    assert summary["public"]["unexplained_failures"] == ["t.py::a"]
    assert "run --classify" in summary["tests"]["t.py::a"]["message"]
