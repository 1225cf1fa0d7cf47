"""Run an unpacked copy of the reference's tests with this interpreter and collect outcomes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from benchmarks.refsuite.classify import merge_records

PLUGIN_DIR = Path(__file__).with_name("plugin")


def _env(record: Path, stubs: Path) -> dict[str, str]:
    env = dict(os.environ)
    # Only the recording plugin is added to the path: nothing of the repository (or of the
    # reference's own package) may shadow the installed comlrl.
    env["PYTHONPATH"] = str(PLUGIN_DIR)
    env["COMLRL_REFSUITE_RECORD"] = str(record)
    # The reference internals its test modules import at import time, as stand-ins.
    env["COMLRL_REFSUITE_STUBS"] = str(stubs)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("WANDB_MODE", "disabled")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def run_tests(
    tests_dir: Path,
    workers: int = 0,
    timeout: float = 900.0,
    only: list[str] | None = None,
    stubs: list[dict] | None = None,
) -> tuple[dict[str, dict], bool]:
    """``(outcomes by test id relative to tests_dir, whether the timeout cut the run short)``;
    ``only`` limits the run to those files (names relative to ``tests_dir``), ``stubs`` are the
    classification's stand-ins for reference internals."""
    tests_dir = Path(tests_dir).resolve()
    run_dir = tests_dir.parent
    record = run_dir / "refsuite-records.jsonl"
    record.unlink(missing_ok=True)
    # An empty ini in the run dir stops pytest from picking up any other configuration.
    ini = run_dir / "refsuite-pytest.ini"
    ini.write_text("[pytest]\n")
    stubs_file = run_dir / "refsuite-stubs.json"
    stubs_file.write_text(json.dumps({"stubs": list(stubs or [])}))
    targets = [str(tests_dir / name) for name in only] if only else [str(tests_dir)]
    cmd = [sys.executable, "-m", "pytest", *targets, "-q", "-c", str(ini)]
    cmd += ["--rootdir", str(tests_dir), "-p", "comlrl_refsuite_stubs"]
    cmd += ["-p", "comlrl_refsuite_record", "-p", "no:cacheprovider"]
    # A module that does not import costs only its own tests.
    cmd += ["--continue-on-collection-errors"]
    cmd += ["-n", str(workers)] if workers > 0 else ["-p", "no:xdist"]
    proc = subprocess.Popen(
        cmd,
        cwd=run_dir,
        env=_env(record, stubs_file),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    records = []
    if record.exists():
        records = [json.loads(ln) for ln in record.read_text().splitlines() if ln.strip()]
    return merge_records(records), timed_out
