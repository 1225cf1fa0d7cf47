"""The trusted judge of a sandboxed run (stdlib only): lock down, start the worker, run tests.

The parent starts ``python -I -S -B _harness.py`` (inside fresh namespaces where the OS
allows) with the job on stdin. The judge applies every OS layer to itself, then starts a fresh
worker process for the generated code and runs the tests here, asking the worker for values.
The verdict goes to the parent on the judge's original stdout, a pipe the worker never holds.
"""

import builtins
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _judge  # noqa: E402
import _lockdown  # noqa: E402  (ctypes lives in the judge only, never in the worker)
import _tests  # noqa: E402
import _verdict  # noqa: E402

sys.path.pop(0)
HERE = os.path.dirname(os.path.abspath(__file__))
# Written on the verdict channel once every layer is on and the first worker started: after
# it, a run without a verdict is the sample's doing (it scores as a failure), before it a
# set-up failure of the sandbox.
LOCKED_DOWN = b"locked down\n"
_LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
_LINKER_FILES = ("/etc/ld.so.cache",)


def read_roots(interpreter):
    """What the child may read: the interpreter's own tree, shared libraries, the worker code."""
    candidates = [sys.base_prefix, interpreter, HERE]
    candidates += [p for p in sys.path if p]
    candidates += list(_LIB_DIRS) + list(_LINKER_FILES)
    roots = []
    # Not resolved: a symlinked /lib64 must exist under its own name for the dynamic linker.
    for path in sorted({os.path.abspath(p) for p in candidates if os.path.exists(p)}):
        if not any(path == r or path.startswith(r + os.sep) for r in roots):
            roots.append(path)
    return roots


def _lock_down(job, report, interpreter):
    """Apply every requested layer. In a normal run any failure is fatal; the probe records it."""
    wanted, limits, probe = job["layers"], job["limits"], job.get("probe", False)
    roots = read_roots(interpreter)
    workdir = job["workdir"]
    steps = []
    if wanted.get("oom"):
        steps.append(("oom", _lockdown.prefer_for_oom_kill))
    if job.get("cgroup"):  # before hide_tree, which leaves /sys behind
        steps.append(("cgroup", lambda: _lockdown.join_cgroup(job["cgroup"])))
    if wanted.get("hide_tree"):
        steps.append(
            (
                "hide_tree",
                lambda: _lockdown.hide_tree(
                    job["newroot"], roots, workdir, limits["disk_mb"], limits["max_files"]
                ),
            )
        )
    if wanted.get("privileges"):
        steps.append(("privileges", _lockdown.drop_privileges))
    if wanted.get("landlock"):
        steps.append(("landlock", lambda: _lockdown.apply_landlock(roots, workdir)))
    for name, step in steps:
        try:
            value = step()
        except OSError as exc:
            if not probe:
                raise
            report["missing"][name] = str(exc)
            continue
        if name == "landlock" and not value:
            report["missing"][name] = "this kernel has no Landlock"
            if not probe:
                raise OSError(0, "this kernel has no Landlock")
            continue
        report["layers"][name] = value if name == "landlock" else True
    os.chdir(workdir)
    _lockdown.apply_rlimits(limits)
    return roots


def _worker_layers(job, report, interpreter):
    """The worker's own layers: signal scoping (Landlock ABI 6, else the seccomp filter stands
    in for it) and the seccomp filter. The probe tries them on a throwaway process; a normal
    run finds out when it starts the first worker, still before any generated code runs."""
    wanted = job["layers"]
    scope = bool(wanted.get("landlock")) and _lockdown.landlock_abi() >= 6
    seccomp = bool(wanted.get("seccomp"))
    own_session = job.get("namespaces", True)
    # IPv4/IPv6 sockets only where the network namespace holds (it has no route out).
    inet = own_session
    confine = _lockdown.worker_confinement(scope, seccomp, own_session, inet)
    if job.get("probe") and seccomp:
        command = [interpreter, "-I", "-S", "-c", "pass"]
        try:
            subprocess.run(command, preexec_fn=confine, check=True, timeout=10)
        except (OSError, subprocess.SubprocessError) as exc:
            report["missing"]["seccomp"] = f"could not be applied: {exc}"
            seccomp = False
            confine = _lockdown.worker_confinement(scope, False, own_session, inet)
    report["layers"]["seccomp"] = seccomp
    report["layers"]["worker_scope"] = "landlock" if scope else ("seccomp" if seccomp else "")
    return confine


def main():
    report_fd = os.dup(1)  # the verdict channel; not inheritable, so no worker ever holds it
    os.dup2(2, 1)  # stray prints (the tests', the worker's) go to the log, not the verdict
    job = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    interpreter = os.path.realpath(sys.executable)
    report = {"layers": {}, "missing": {}, "tests": []}

    def finish():
        view = memoryview(_verdict.encode(report))
        while view:
            view = view[os.write(report_fd, view) :]
        os.close(report_fd)
        os._exit(0)

    if job.get("unittest_source"):
        import unittest  # noqa: F401  (loaded before Landlock, like everything the judge needs)
    try:
        roots = _lock_down(job, report, interpreter)
        confine = _worker_layers(job, report, interpreter)
        _lockdown.ignore_fatal_signals()
    except Exception as exc:  # reported to the parent, which raises: never run code half-locked
        report["status"] = "sandbox_error"
        report["setup_error"] = f"{type(exc).__name__}: {exc}"
        finish()
    if job.get("probe"):
        report["status"] = "ok"
        finish()
    head = {
        "setup": job["setup"],
        "workdir": job["workdir"],
        "read_roots": roots,
        "python_guard": job["limits"]["python_guard"],
    }
    report["layers"]["python_guard"] = bool(job["limits"]["python_guard"])
    limits = job["limits"]
    session = _judge.Session(interpreter, dict(os.environ), head, limits["test_timeout"], confine)
    try:
        session.spawn()
    except Exception as exc:  # the worker could not start with its layers: a set-up failure
        report["status"] = "sandbox_error"
        report["setup_error"] = f"the worker did not start: {type(exc).__name__}: {exc}"
        finish()
    os.write(report_fd, LOCKED_DOWN)
    namespace = {"__name__": "__sandbox__", "__builtins__": builtins}
    try:
        report.update(_tests.run(job, session, namespace))
    except BaseException as exc:  # whatever happens, the sample gets a verdict
        report.update(status="crashed", fault="judge_error", setup_error=type(exc).__name__)
    try:
        session.close()
    except BaseException as exc:  # the verdict stands; the parent kills what is left
        report["close_error"] = type(exc).__name__
    finish()


if __name__ == "__main__":
    main()
