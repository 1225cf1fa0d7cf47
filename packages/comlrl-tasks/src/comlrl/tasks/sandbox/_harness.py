"""The trusted first stage of a sandboxed child process (stdlib only).

The parent starts ``python -I -S -B _harness.py <run dir>``. This script reads the job the
parent left in the run dir, locks the process down (resource limits, Landlock, an audit-hook
guard), and only then executes the generated code and its tests. It reports back through a file
it opened before any untrusted code ran; the report carries a nonce that the untrusted code never
sees, so a forged report is ignored by the parent.
"""

import json
import os
import resource
import signal
import sys

JOB_FILE = "job.json"
RESULT_FILE = "result.json"
MESSAGE_LIMIT = 400

# Landlock constants (linux/landlock.h); the syscall numbers are the same on every architecture.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_RULE_PATH_BENEATH = 1
_FS_WRITE_FILE = 1 << 1
_FS_WRITE_RIGHTS_V1 = sum(1 << bit for bit in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_PR_SET_NO_NEW_PRIVS = 38


class SandboxTimeout(BaseException):
    """Raised by the per-test alarm; a BaseException so ``except Exception`` cannot swallow it."""


def _on_alarm(signum, frame):
    raise SandboxTimeout("test exceeded its time limit")


def _apply_rlimits(limits):
    mib = 1024 * 1024
    pairs = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_CPU, int(limits["cpu_seconds"])),
        (resource.RLIMIT_FSIZE, int(limits["file_size_mb"]) * mib),
        (resource.RLIMIT_NPROC, int(limits["max_processes"])),
        (resource.RLIMIT_NOFILE, int(limits["max_open_files"])),
        (resource.RLIMIT_AS, int(limits["memory_mb"]) * mib),
    ]
    for kind, value in pairs:
        # soft == hard: the process cannot raise its own limits again.
        resource.setrlimit(kind, (value, value))


def _apply_landlock(workdir):
    """Confine writes to ``workdir`` (plus /dev/null) and deny TCP; return the ABI used (0 = none)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return 0
    fs_rights = _FS_WRITE_RIGHTS_V1
    if abi >= 2:
        fs_rights |= _FS_REFER
    if abi >= 3:
        fs_rights |= _FS_TRUNCATE
    attr = (ctypes.c_uint64 * 3)(fs_rights, 0, 0)
    size = 8
    if abi >= 4:
        attr[1] = _NET_BIND_TCP | _NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr[2] = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
        size = 24
    ruleset = libc.syscall(
        _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    file_rights = _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
    for path, rights in ((workdir, fs_rights), ("/dev/null", file_rights)):
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            rule = PathBeneath(rights, fd)
            if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        finally:
            os.close(fd)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(ruleset)
    return abi


_BLOCKED_EVENTS = frozenset(
    {
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "subprocess.Popen",
        "pty.spawn",
        "os.kill",
        "os.killpg",
        "os.startfile",
        "socket.__new__",
        "socket.connect",
        "socket.bind",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
        "resource.setrlimit",
        "resource.prlimit",
        "webbrowser.open",
    }
)
_BLOCKED_IMPORTS = frozenset(
    {
        "ctypes",
        "_ctypes",
        "_posixsubprocess",
        "multiprocessing",
        "_multiprocessing",
    }
)
# Events that change the file system, and the positions of their path arguments.
_PATH_EVENTS = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.rename": (0, 1),
    "os.symlink": (1,),
    "os.link": (1,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (1,),
    "shutil.copymode": (1,),
    "shutil.copystat": (1,),
    "shutil.chown": (0,),
    "shutil.move": (1,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _install_guard(workdir):
    """Refuse network, process creation and writes outside ``workdir`` at the Python level."""
    root = os.path.realpath(workdir)
    realpath, fspath, sep = os.path.realpath, os.fspath, os.sep

    def inside(path):
        if isinstance(path, int):
            return True
        try:
            text = fspath(path)
        except TypeError:
            return False
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        resolved = realpath(text)
        return resolved == root or resolved.startswith(root + sep) or resolved == "/dev/null"

    def hook(event, args):
        if event in _BLOCKED_EVENTS or event.startswith("ctypes."):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and args and args[0] in _BLOCKED_IMPORTS:
            raise PermissionError(f"sandbox: importing {args[0]} is not allowed")
        if event == "open" and len(args) >= 3:
            path, mode, flags = args[0], args[1], args[2]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and not inside(path):
                raise PermissionError(f"sandbox: writing {path!r} is not allowed")
        positions = _PATH_EVENTS.get(event)
        if positions:
            for index in positions:
                if index < len(args) and not inside(args[index]):
                    raise PermissionError(f"sandbox: {event} on {args[index]!r} is not allowed")

    sys.addaudithook(hook)


def _short(exc):
    text = f"{exc}"
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def _run_timed(code_obj, namespace, seconds):
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        exec(code_obj, namespace)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _outcome(name, exc):
    if exc is None:
        return {"name": name, "passed": True}
    timed_out = isinstance(exc, SandboxTimeout)
    message = _short(exc)
    if isinstance(exc, AssertionError) and not message:
        message = "assertion failed"
    return {
        "name": name,
        "passed": False,
        "timed_out": timed_out,
        "error_type": "Timeout" if timed_out else getattr(exc, "type_name", type(exc).__name__),
        "message": message,
    }


def _explain_assert(source, namespace, seconds):
    """For a failed ``assert left == right``, say what ``left`` evaluated to."""
    import ast

    try:
        node = ast.parse(source).body[0]
    except (SyntaxError, IndexError):
        return ""
    test = getattr(node, "test", None)
    if not (
        isinstance(node, ast.Assert)
        and isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Eq, ast.Is))
    ):
        return ""
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            got = eval(compile(ast.Expression(test.left), "<assert>", "eval"), namespace)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        shown = repr(got)
    except BaseException:  # the left side itself fails; the plain message is enough then
        return ""
    if len(shown) > MESSAGE_LIMIT // 2:
        shown = shown[: MESSAGE_LIMIT // 2 - 3] + "..."
    return f"expected {ast.unparse(test.comparators[0])}, got {shown}"


def _run_snippets(job, namespace, limits):
    outcomes, timeouts = [], 0
    for index, test in enumerate(job.get("tests", [])):
        name = test.get("name") or f"test {index + 1}"
        if timeouts >= limits["max_test_timeouts"]:
            if test.get("counts", True):
                outcomes.append(
                    {
                        "name": name,
                        "passed": False,
                        "error_type": "Skipped",
                        "message": "not run after repeated timeouts",
                    }
                )
            continue
        error = None
        try:
            _run_timed(
                compile(test["code"], f"<{name}>", "exec"), namespace, limits["test_timeout"]
            )
        except BaseException as exc:  # the generated code may raise anything, SystemExit included
            error = exc
        if isinstance(error, SandboxTimeout):
            timeouts += 1
        if test.get("counts", True):
            outcome = _outcome(name, error)
            if isinstance(error, AssertionError) and not str(error):
                outcome["message"] = (
                    _explain_assert(test["code"], namespace, limits["test_timeout"])
                    or outcome["message"]
                )
            outcomes.append(outcome)
    return outcomes


class ReportedError(Exception):
    """A failure unittest already formatted; keeps the original exception's type name."""

    def __init__(self, type_name, message):
        super().__init__(message)
        self.type_name = type_name


def _reported_error(formatted):
    """Turn unittest's formatted traceback into an exception carrying its type and message."""
    lines = formatted.strip().splitlines()
    last = lines[-1] if lines else "test failed"
    head, sep, message = last.partition(": ")
    type_name = head.rsplit(".", 1)[-1] if sep and " " not in head else "Error"
    if type_name == "SandboxTimeout":
        return SandboxTimeout(message)
    return ReportedError(type_name, message if sep else last)


def _run_unittests(job, namespace, limits):
    import unittest  # already loaded by main() before the guard went up

    _run_timed(
        compile(job["unittest_source"], "<tests>", "exec"), namespace, limits["test_timeout"]
    )
    loader = unittest.TestLoader()
    cases = sorted(
        (
            value
            for value in namespace.values()
            if isinstance(value, type)
            and issubclass(value, unittest.TestCase)
            and value.__module__ == namespace["__name__"]
        ),
        key=lambda cls: cls.__name__,
    )
    outcomes, timeouts = [], 0
    for case in cases:
        for method in loader.getTestCaseNames(case):
            name = f"{case.__name__}.{method}"
            if timeouts >= limits["max_test_timeouts"]:
                outcomes.append(
                    {
                        "name": name,
                        "passed": False,
                        "error_type": "Skipped",
                        "message": "not run after repeated timeouts",
                    }
                )
                continue
            result = unittest.TestResult()
            error = None
            try:
                signal.setitimer(signal.ITIMER_REAL, limits["test_timeout"])
                try:
                    case(method).run(result)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except BaseException as exc:  # a timeout raised outside unittest's own handlers
                error = exc
            problems = result.errors + result.failures
            if error is None and problems:
                error = _reported_error(problems[0][1])
            if error is None and result.testsRun != 1:
                error = RuntimeError("test did not run")
            if isinstance(error, SandboxTimeout):
                timeouts += 1
            outcomes.append(_outcome(name, error))
    return outcomes


def _lock_down(job, workdir, report):
    """Apply every requested layer; any failure here is the sandbox's, not the code's."""
    limits = job["limits"]
    signal.signal(signal.SIGALRM, _on_alarm)
    if job.get("unittest_source"):
        # Loaded only when needed (it is the slowest import here), and before the guard.
        import unittest  # noqa: F401
    report["layers"]["landlock"] = _apply_landlock(workdir) if limits["landlock"] else 0
    sys.modules.pop("ctypes", None)
    sys.modules.pop("_ctypes", None)
    _apply_rlimits(limits)
    if limits["python_guard"]:
        _install_guard(workdir)
    report["layers"]["python_guard"] = bool(limits["python_guard"])


def main():
    # The run dir holds the job and the report; generated code only gets its "work" subdir.
    run_dir = sys.argv[1]
    workdir = os.path.join(run_dir, "work")
    with open(os.path.join(run_dir, JOB_FILE), encoding="utf-8") as handle:
        job = json.load(handle)
    os.remove(os.path.join(run_dir, JOB_FILE))
    nonce, limits = job["nonce"], job["limits"]
    report_fd = os.open(
        os.path.join(run_dir, RESULT_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600
    )
    report = {"nonce": nonce, "pid": os.getpid(), "layers": {}, "tests": []}
    os.chdir(workdir)

    def finish():
        data = json.dumps(report).encode("utf-8")
        os.write(report_fd, data)
        os.close(report_fd)
        sys.stdout.flush()
        # os._exit skips atexit handlers and finalizers the generated code may have registered.
        os._exit(0)

    try:
        _lock_down(job, workdir, report)
    except Exception as exc:  # reported to the parent, which raises: never run code half-locked
        report["status"] = "sandbox_error"
        report["setup_error"] = f"{type(exc).__name__}: {exc}"
        finish()

    namespace = {"__name__": "__sandbox__", "__builtins__": __builtins__}
    try:
        _run_timed(compile(job["setup"], "<agents>", "exec"), namespace, limits["test_timeout"])
    except BaseException as exc:  # the generated code may raise anything, SystemExit included
        report["status"] = "setup_error"
        report["setup_error_type"] = (
            "Timeout" if isinstance(exc, SandboxTimeout) else type(exc).__name__
        )
        detail = _short(exc)
        if isinstance(exc, SyntaxError):
            detail = f"line {exc.lineno}, column {exc.offset}: {exc.msg}"
        report["setup_error"] = detail
        finish()
    report["status"] = "ok"
    try:
        if job.get("unittest_source"):
            report["tests"] = _run_unittests(job, namespace, limits)
        else:
            report["tests"] = _run_snippets(job, namespace, limits)
    except BaseException as exc:  # the test module itself failed to load
        report["status"] = "setup_error"
        report["setup_error_type"] = type(exc).__name__
        report["setup_error"] = "tests could not be loaded: " + _short(exc)
    finish()


if __name__ == "__main__":
    main()
