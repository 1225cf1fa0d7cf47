"""Run one :class:`ExecJob` in a fresh, locked-down child process."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from comlrl.tasks.sandbox import _verdict
from comlrl.tasks.sandbox.cgroup import JUDGE_MB, RunCgroup
from comlrl.tasks.sandbox.isolation import HARNESS, SandboxError, plan_for, scrubbed_env
from comlrl.tasks.sandbox.jobs import FAULTS, ExecJob, ExecResult, TestOutcome
from comlrl.tasks.sandbox.limits import SandboxLimits

__all__ = ["HARNESS", "SandboxError", "run_job"]
# The judge's mark that every layer is on (see _harness.LOCKED_DOWN).
_LOCKED_DOWN = b"locked down\n"
_OUTPUT_TAIL = 2000
# Bytes of the run's output (the judge's stderr, the worker's stdout and stderr) the parent
# keeps; the rest is read and dropped.
_OUTPUT_CAP = 64 * 1024
_READ_SIZE = 65536
_VERDICT_MAX = len(_LOCKED_DOWN) + _verdict.MAX_VERDICT
_POLL = 0.05
# Slack on top of wall_seconds for interpreter start-up and namespace creation; small enough
# that a reward call never holds the trainer more than one second past the time limit.
_START_SLACK = 0.5
_QUOTA_POLL = 0.05


def _job_payload(
    job: ExecJob, limits: SandboxLimits, layers: dict, run_dir: Path, namespaces: bool
) -> dict:
    return {
        "namespaces": namespaces,
        "setup": job.setup,
        "tests": [{"code": t.code, "name": t.name, "counts": t.counts} for t in job.tests],
        "unittest_source": job.unittest_source,
        "entry_point": job.entry_point,
        "context": job.context,
        "limits": limits.as_dict(),
        "layers": layers,
        "workdir": str(run_dir / "work"),
        "newroot": str(run_dir / "root"),
    }


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        # The group is already gone: every process in it has exited.
        return


def _session_members(sid: int) -> list[int]:
    """Live (not zombie) processes in session ``sid``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(os.path.join(entry.path, "stat"), "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[3]) == sid and fields[0] != b"Z":
            found.append(int(entry.name))
    return found


def _kill_session(sid: int, rounds: int = 5) -> None:
    """SIGKILL every process still in session ``sid`` (the run's, without a PID namespace).

    Called while the session leader is not yet reaped, so its id cannot belong to another
    session; repeated a few times for processes forked while we looked. A process that started
    a session of its own is out of reach (the namespaces are what stops that).
    """
    for _ in range(rounds):
        members = _session_members(sid)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended on its own meanwhile
                continue


def _tail(output: bytes) -> str:
    return _verdict.text(output[-_OUTPUT_TAIL:].decode("utf-8", "replace"), _OUTPUT_TAIL)


class _Exchange:
    """The parent's side of the judge's three pipes, each bounded.

    It writes the job to stdin, reads the verdict from stdout up to the largest a judge sends
    (closing the pipe past it) and keeps the first :data:`_OUTPUT_CAP` bytes of the run's
    output from stderr, dropping the rest as it comes. Nothing of the run is written to a host
    file.
    """

    def __init__(self, proc: subprocess.Popen, payload: bytes):
        self.proc, self.verdict, self.output = proc, bytearray(), bytearray()
        self.overflow = False
        self._selector = selectors.DefaultSelector()
        self._payload = memoryview(payload)
        # One byte over the verdict's bound tells an oversized verdict from a full one.
        self._caps = {
            proc.stdout.fileno(): (proc.stdout, self.verdict, _VERDICT_MAX + 1),
            proc.stderr.fileno(): (proc.stderr, self.output, _OUTPUT_CAP),
        }
        for fd in self._caps:
            self._selector.register(fd, selectors.EVENT_READ)
        os.set_blocking(proc.stdin.fileno(), False)
        self._selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)

    def run(self, seconds: float) -> bool:
        """Exchange until the verdict is complete and the judge has exited; False on timeout."""
        deadline = time.monotonic() + seconds
        stdout = self.proc.stdout.fileno()
        while True:
            verdict_done = stdout not in self._registered()
            if verdict_done and self.proc.poll() is not None:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in self._selector.select(min(left, _POLL)):
                if key.events & selectors.EVENT_WRITE:
                    self._write(key.fd)
                else:
                    self._read(key.fd)

    def _registered(self) -> set[int]:
        return set(self._selector.get_map())

    def _write(self, fd: int) -> None:
        try:
            self._payload = self._payload[os.write(fd, self._payload[: 1 << 16]) :]
        except BlockingIOError:  # the pipe filled up meanwhile; try again when writable
            return
        except BrokenPipeError:  # the judge is gone; what it left says why
            self._payload = self._payload[:0]
        if not self._payload:
            self._selector.unregister(fd)
            self.proc.stdin.close()

    def _read(self, fd: int) -> None:
        pipe, buffer, cap = self._caps[fd]
        chunk = os.read(fd, _READ_SIZE)
        buffer += chunk[: cap - len(buffer)]
        self.overflow = len(self.verdict) > _VERDICT_MAX
        # Output past its cap is read and dropped, so a chatty but correct sample never
        # blocks or breaks on a full pipe; a verdict past its cap is not one the judge sent.
        if not chunk or self.overflow:
            self._selector.unregister(fd)
            pipe.close()

    def close(self) -> None:
        """Close what is still open (after the run's processes are dead)."""
        self._selector.close()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            pipe.close()


def _force_remove(func, path, _exc_info):
    # Generated code may have removed write or search bits from what it created.
    os.chmod(os.path.dirname(path) or ".", stat.S_IRWXU)
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, stat.S_IRWXU)
    func(path)


def _disk_use(root: Path) -> tuple[int, int]:
    """Bytes allocated and entries beneath ``root`` (entries that vanish mid-walk are skipped)."""
    used = count = 0
    stack = [str(root)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:  # removed or made unreadable while we looked
            continue
        for entry in entries:
            count += 1
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            used += info.st_blocks * 512
            if stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)
    return used, count


class _QuotaWatch:
    """Kills the run when its host work dir grows past the quota (used without the tmpfs)."""

    def __init__(self, workdir: Path, limits: SandboxLimits, pgid: int):
        self.workdir, self.pgid = workdir, pgid
        self.max_bytes, self.max_files = limits.disk_mb * 1024 * 1024, limits.max_files
        self.exceeded = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _over(self) -> bool:
        used, count = _disk_use(self.workdir)
        return used > self.max_bytes or count > self.max_files

    def _watch(self) -> None:
        while not self._stop.wait(_QUOTA_POLL):
            if self._over():
                self.exceeded = True
                _kill_group(self.pgid)
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.exceeded = self.exceeded or self._over()


def _to_result(report: dict | None, killed: bool, returncode: int | None) -> ExecResult:
    if killed:
        status = "killed"
    elif report is None:
        status = "crashed"
    else:
        status = report.get("status", "crashed")
    result = ExecResult(status=status, returncode=returncode)
    if report is not None:
        tests = report.get("tests") if type(report.get("tests")) is list else []
        result.tests = [
            TestOutcome(
                name=t.get("name") or "",
                passed=t.get("passed") is True,
                timed_out=t.get("timed_out") is True,
                error_type=t.get("error_type"),
                message=t.get("message") or "",
            )
            for t in tests
            if type(t) is dict
        ]
        result.setup_error = report.get("setup_error")
        result.setup_error_type = report.get("setup_error_type")
        layers = report.get("layers")
        result.layers = dict(layers) if type(layers) is dict else {}
        fault = report.get("fault")
        result.fault = fault if fault in FAULTS else None
    return result


def _read_verdict(out: bytes) -> tuple[bool, dict | None]:
    """(whether the judge locked down, its report or None) from the judge's verdict channel.

    Every string of the report is bounded and made valid UTF-8 here too, so nothing in the
    result can be longer than its field allows or fail to encode.
    """
    locked = out.startswith(_LOCKED_DOWN)
    if locked:
        out = out[len(_LOCKED_DOWN) :]
    try:
        report = json.loads(out.decode("utf-8")) if out else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        report = None
    return locked, _verdict.clean(report) if isinstance(report, dict) else None


def run_job(job: ExecJob, limits: SandboxLimits | None = None) -> ExecResult:
    """Execute ``job`` in a sandboxed child and return the judge's verdict.

    The child (the judge) gets a fresh temp dir (removed afterwards) whose ``work`` subdir is
    its cwd, home and the only place it may write; a scrubbed environment; its own session, so
    the whole process group can be killed; and, where the OS allows, fresh namespaces in which
    only the interpreter's files exist. The generated code runs in a worker the judge starts;
    the verdict comes back on a pipe only the judge holds. On ``wall_seconds`` every process of
    the run is killed with SIGKILL. A child that could not start or lock itself down raises
    :class:`SandboxError` instead of scoring as a failure; with ``strict`` limits a missing
    layer raises it before any code runs. Once the judge reported "locked down", a run without
    a verdict is the sample's doing: it scores as a failure with ``fault="no_verdict"``.
    """
    limits = limits or SandboxLimits()
    plan = plan_for(limits)
    run_dir = Path(tempfile.mkdtemp(prefix="comlrl-sandbox-"))
    workdir = run_dir / "work"
    workdir.mkdir()
    (run_dir / "root").mkdir()
    group = None
    try:
        if plan.cgroup:
            memory = (limits.memory_mb + limits.disk_mb + JUDGE_MB) * 1024 * 1024
            try:
                group = RunCgroup(plan.cgroup, memory, limits.max_processes + 8)
            except OSError as exc:
                raise SandboxError(
                    f"could not make the run's cgroup in {plan.cgroup}: {exc}"
                ) from exc
        payload = _job_payload(job, limits, plan.layers, run_dir, bool(plan.prefix))
        payload["cgroup"] = group.path if group else ""
        command = [*plan.prefix, sys.executable, "-I", "-S", "-B", str(HARNESS)]
        started = time.monotonic()
        proc = subprocess.Popen(
            command,
            cwd=workdir,
            env=scrubbed_env(str(workdir)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
        watch = _QuotaWatch(workdir, limits, proc.pid)
        exchange = _Exchange(proc, json.dumps(payload).encode("utf-8"))
        try:
            killed = not exchange.run(limits.wall_seconds + _START_SLACK)
        finally:
            # Also reaps anything the run left behind in its group after a normal exit.
            _kill_group(proc.pid)
            if not plan.prefix and os.path.isdir("/proc"):
                _kill_session(proc.pid)  # the worker's own group lives in this session
            if group is not None:
                group.close()  # every process of the run, wherever it went
            proc.wait()
            watch.stop()
            exchange.close()
        returncode = None if killed else proc.returncode
        finished = time.monotonic()
        out, output = bytes(exchange.verdict), bytes(exchange.output)
        locked, report = _read_verdict(out)
        if exchange.overflow:  # over any verdict the judge sends: not one to trust
            report = None
        lost = report is None and locked and not (killed or watch.exceeded)
        if lost:
            # Locked down, then no verdict: the sample took the judge down; its failure.
            report = {"status": "crashed", "fault": "no_verdict", "setup_error": "no verdict"}
        if report is None and not (killed or watch.exceeded):
            raise SandboxError(
                "the sandbox child ended without a verdict (is unshare or the interpreter "
                f"usable?); its output: {_tail(output)!r}. "
                "Try task.options.sandbox.namespaces: false."
            )
        if report is not None and report.get("status") == "sandbox_error":
            raise SandboxError(
                f"the sandbox could not lock the child down: {report.get('setup_error')}. "
                "Turn the failing layer off in task.options.sandbox (namespaces, landlock)."
            )
        result = _to_result(report, killed or watch.exceeded, returncode)
        if watch.exceeded:
            result.tests = []
            result.setup_error = f"the work dir went over sandbox.disk_mb ({limits.disk_mb} MB)"
        result.pid, result.started, result.finished = proc.pid, started, finished
        result.layers["namespaces"] = bool(plan.prefix)
        if result.status != "ok":
            result.output_tail = _tail(output)
        return result
    finally:
        if group is not None:
            group.close()  # also when the judge never started
        shutil.rmtree(run_dir, onerror=_force_remove)
