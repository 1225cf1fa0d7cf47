"""Run one :class:`ExecJob` in a fresh, locked-down child process."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from comlrl.tasks.sandbox.isolation import namespace_prefix, scrubbed_env
from comlrl.tasks.sandbox.jobs import ExecJob, ExecResult, TestOutcome
from comlrl.tasks.sandbox.limits import SandboxLimits

HARNESS = Path(__file__).with_name("_harness.py")
_OUTPUT_TAIL = 2000
# Slack on top of the limits for interpreter start-up and namespace creation.
_START_SLACK = 2.0


def _job_payload(job: ExecJob, limits: SandboxLimits, nonce: str) -> dict:
    return {
        "nonce": nonce,
        "setup": job.setup,
        "tests": [{"code": t.code, "name": t.name, "counts": t.counts} for t in job.tests],
        "unittest_source": job.unittest_source,
        "limits": limits.as_dict(),
    }


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        # The group is already gone: every process in it has exited.
        return


class SandboxError(RuntimeError):
    """The sandbox itself could not start or lock down a child (not the generated code's fault)."""


def _read_report(path: Path, nonce: str) -> dict | None:
    if not path.is_file():
        return None
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(report, dict) or report.get("nonce") != nonce:
        return None
    return report


def _tail(path: Path) -> str:
    if not path.is_file():
        return ""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - _OUTPUT_TAIL))
        return handle.read().decode("utf-8", "replace")


def _force_remove(func, path, _exc_info):
    # Generated code may have removed write or search bits from what it created.
    os.chmod(os.path.dirname(path) or ".", stat.S_IRWXU)
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, stat.S_IRWXU)
    func(path)


def _to_result(report: dict | None, killed: bool, returncode: int | None) -> ExecResult:
    if killed:
        status = "killed"
    elif report is None:
        status = "crashed"
    else:
        status = report.get("status", "crashed")
    result = ExecResult(status=status, returncode=returncode)
    if report is not None:
        result.tests = [
            TestOutcome(
                name=str(t.get("name", "")),
                passed=bool(t.get("passed")),
                timed_out=bool(t.get("timed_out")),
                error_type=t.get("error_type"),
                message=str(t.get("message", "")),
            )
            for t in report.get("tests", [])
        ]
        result.setup_error = report.get("setup_error")
        result.setup_error_type = report.get("setup_error_type")
        result.layers = dict(report.get("layers", {}))
    return result


def run_job(job: ExecJob, limits: SandboxLimits | None = None) -> ExecResult:
    """Execute ``job`` in a sandboxed child and return what it reported.

    The child gets a fresh temp dir (removed afterwards) whose ``work`` subdir is its cwd, home
    and the only place it may write; a scrubbed environment; its own session, so the whole
    process group can be killed; and, where the OS allows, fresh network and PID namespaces. On
    ``wall_seconds`` every process of the run is killed with SIGKILL. A child that could not
    start or lock itself down raises :class:`SandboxError` instead of scoring as a failure.
    """
    limits = limits or SandboxLimits()
    run_dir = Path(tempfile.mkdtemp(prefix="comlrl-sandbox-"))
    workdir = run_dir / "work"
    workdir.mkdir()
    nonce = secrets.token_hex(16)
    try:
        payload = json.dumps(_job_payload(job, limits, nonce))
        (run_dir / "job.json").write_text(payload, encoding="utf-8")
        prefix = namespace_prefix() if limits.namespaces else ()
        command = [*prefix, sys.executable, "-I", "-S", "-B", str(HARNESS), str(run_dir)]
        log_path = run_dir / "output.log"
        killed = False
        with open(log_path, "wb") as log:
            started = time.monotonic()
            proc = subprocess.Popen(
                command,
                cwd=workdir,
                env=scrubbed_env(str(workdir)),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
            try:
                returncode = proc.wait(timeout=limits.wall_seconds + _START_SLACK)
            except subprocess.TimeoutExpired:
                killed = True
                returncode = None
            finally:
                # Also reaps anything the run left behind in its group after a normal exit.
                _kill_group(proc.pid)
                proc.wait()
            finished = time.monotonic()
        report_path = run_dir / "result.json"
        if not killed and not report_path.exists():
            raise SandboxError(
                "the sandbox child never started (is unshare or the interpreter usable?); its "
                f"output: {_tail(log_path)!r}. Try task.options.sandbox.namespaces: false."
            )
        report = _read_report(report_path, nonce)
        if report is not None and report.get("status") == "sandbox_error":
            raise SandboxError(
                f"the sandbox could not lock the child down: {report.get('setup_error')}. "
                "Turn the failing layer off in task.options.sandbox (landlock, python_guard)."
            )
        result = _to_result(report, killed, returncode)
        result.pid, result.started, result.finished = proc.pid, started, finished
        result.layers["namespaces"] = bool(prefix)
        if result.status != "ok":
            result.output_tail = _tail(log_path)
        return result
    finally:
        shutil.rmtree(run_dir, onerror=_force_remove)
