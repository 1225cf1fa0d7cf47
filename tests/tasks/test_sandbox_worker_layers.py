"""The worker's own layers and the judge's defences, each checked with the others turned off."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import threading
import time
import uuid
import warnings

import pytest

import comlrl.tasks.sandbox.isolation as isolation
from comlrl.tasks.sandbox import ExecJob, TestSnippet, run_job
from tests.tasks.helpers import fast_limits
from tests.tasks.test_sandbox_attacks import _alive_with

SANDBOX = os.path.dirname(isolation.__file__)

# Tries each call from the worker and records the errno name (or "ok").
PROBE = """
import ctypes, errno, os, signal
found = {}
libc = ctypes.CDLL(None, use_errno=True)
def probe(name, call):
    try:
        call()
        found[name] = 'ok'
    except OSError as exc:
        found[name] = errno.errorcode.get(exc.errno, str(exc.errno))
def raw(*args):
    if libc.syscall(*args) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
"""


def _plan(**layers) -> isolation.Plan:
    found = isolation.probe_layers(True, True)
    return dataclasses.replace(found, layers={**found.layers, **layers})


def _run(setup: str, tests=("assert f() == 1",), plan=None, monkeypatch=None, **limits):
    if plan is not None:
        monkeypatch.setattr(isolation, "probe_layers", lambda namespaces, landlock: plan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # layers turned off on purpose
        job = ExecJob(setup=setup, tests=tuple(TestSnippet(t) for t in tests))
        return run_job(job, fast_limits(python_guard=False, **limits))


def _expect(setup: str, expected: dict, **run_args):
    """Run the probe ``setup`` (its ``f()`` returns what it found) and check every entry."""
    tests = tuple(f"assert f()[{name!r}] == {want!r}" for name, want in expected.items())
    result = _run(setup, tests, **run_args)
    assert result.status == "ok", (result.setup_error, result.output_tail)
    assert {t.name: t.message for t in result.tests if not t.passed} == {}
    return result


SYSCALLS = {
    "x86_64": {"unshare": 272, "ptrace": 101, "mount": 165, "fcntl": 72},
    "aarch64": {"unshare": 97, "ptrace": 117, "mount": 40, "fcntl": 25},
}


def test_the_worker_filter_refuses_what_reaches_past_the_worker():
    plan = isolation.probe_layers(True, True)
    numbers = SYSCALLS.get(os.uname().machine)
    if "seccomp" in plan.missing or numbers is None:
        pytest.skip(f"no seccomp filter on this machine: {plan.missing.get('seccomp')}")
    setup = PROBE + (
        f"probe('unshare', lambda: raw({numbers['unshare']}, 0x10000000))\n"
        f"probe('ptrace', lambda: raw({numbers['ptrace']}, 16, os.getppid(), 0, 0))\n"
        f"probe('mount', lambda: raw({numbers['mount']}, b'none', b'/tmp', b'tmpfs', 0, None))\n"
        f"probe('setown', lambda: raw({numbers['fcntl']}, 0, 8, os.getppid()))\n"
        "probe('pidfd_open', lambda: os.pidfd_open(os.getpid()))\n"
        "probe('kill_judge', lambda: os.kill(os.getppid(), 0))\n"
        "probe('kill_self', lambda: os.kill(os.getpid(), 0))\n"
        "probe('kill_group', lambda: os.kill(0, 0))\n"
        "import threading\n"
        "t = threading.Thread(target=lambda: None)\n"
        "t.start()\n"
        "t.join()\n"
        "found['thread'] = 'ok'\n"
        "probe('fork', os.fork)\n"
        "probe('memfd', lambda: os.memfd_create('x'))\n"
        "probe('unix', lambda: socket.socketpair(socket.AF_UNIX))\n"
        "probe('netlink', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW))\n"
        "def f():\n    return found"
    )
    setup = setup.replace("import ctypes,", "import socket, ctypes,", 1)
    denied = ("unshare", "ptrace", "mount", "setown", "pidfd_open", "kill_judge", "fork")
    denied += ("memfd", "netlink")
    expected = {**dict.fromkeys(denied, "EPERM"), "kill_self": "ok", "kill_group": "ok"}
    _expect(setup, {**expected, "thread": "ok", "unix": "ok"})


def test_landlock_scope_alone_keeps_signals_from_the_judge(monkeypatch):
    plan = isolation.probe_layers(True, True)
    if not plan.layers.get("landlock") or "landlock_scope" in plan.missing:
        pytest.skip("this kernel has no Landlock signal scoping (ABI 6)")
    setup = PROBE + (
        "probe('kill_judge', lambda: os.kill(os.getppid(), signal.SIGINT))\n"
        "probe('pidfd', lambda: signal.pidfd_send_signal(os.pidfd_open(os.getppid()), 2))\n"
        "def f():\n    return found"
    )
    expected = {"kill_judge": "EPERM", "pidfd": "EPERM"}
    result = _expect(setup, expected, plan=_plan(seccomp=False), monkeypatch=monkeypatch)
    assert result.layers["worker_scope"] == "landlock" and result.layers["seccomp"] is False


def test_the_judge_ignores_fatal_signals_with_no_other_layer(monkeypatch):
    setup = (
        "import os, signal\n"
        "for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):\n"
        "    os.kill(os.getppid(), number)\n"
        "def f():\n    return 1"
    )
    plan = _plan(seccomp=False, landlock=False)
    result = _run(setup, plan=plan, monkeypatch=monkeypatch, landlock=False)
    assert result.layers["worker_scope"] == ""
    assert result.status == "ok" and result.passed == 1 and result.fault is None


def test_a_judge_killed_after_lock_down_is_the_samples_failure(monkeypatch):
    # With no layer between them, the worker can SIGKILL the judge: no verdict comes back,
    # which scores the sample as a failure instead of raising SandboxError.
    setup = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\ndef f():\n    return 1"
    plan = isolation.Plan((), {"seccomp": False}, {})
    result = _run(setup, plan=plan, monkeypatch=monkeypatch, landlock=False, namespaces=False)
    assert result.status == "crashed" and result.fault == "no_verdict" and result.passed == 0


def test_the_work_dir_runs_nothing_written_there():
    setup = PROBE + (
        "import mmap\n"
        "with open('x.so', 'wb') as out:\n"
        "    out.write(b'\\x7fELF' + bytes(8192))\n"
        "os.chmod('x.so', 0o755)\n"
        "probe('exec', lambda: os.execv('./x.so', ['x']))\n"
        "def mapped():\n"
        "    with open('x.so', 'rb') as handle:\n"
        "        mmap.mmap(handle.fileno(), 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC)\n"
        "probe('mmap_exec', mapped)\n"
        "def f():\n    return found"
    )
    plan = isolation.probe_layers(True, True)
    if not (plan.layers.get("hide_tree") or plan.layers.get("landlock")):
        pytest.skip("neither the tmpfs work dir nor Landlock is available here")
    # Landlock without the execute right refuses exec (EACCES); noexec refuses exec and
    # executable mappings (EACCES, EPERM).
    expected = {"exec": "EACCES"}
    if plan.layers.get("hide_tree"):
        expected["mmap_exec"] = "EPERM"
    _expect(setup, expected)


def test_tests_see_the_real_builtins_and_the_helpers_they_name():
    setup = (
        "import math as m\n"
        "def len(x):\n    return 3\n"
        "def poly(x):\n    return 2\n"
        "def f():\n    return [1]"
    )
    tests = ("assert len(f()) == 1", "assert poly(1) == 2", "assert m.sqrt(4) == 2")
    result = _run(setup, tests)
    assert [t.passed for t in result.tests] == [True, True, True]


def _wire():
    spec = importlib.util.spec_from_file_location("_wire", os.path.join(SANDBOX, "_wire.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_wire_decoder_is_bounded_in_nodes_depth_and_memory():
    wire = _wire()
    read, write = os.pipe()
    body = b"[" + b"[]," * (wire.MAX_NODES // 2) + b"[]]"  # 3 MB, far under MAX_MESSAGE
    # The pipe holds less than the frame, so another thread writes it.
    writer = threading.Thread(target=wire.send, args=(write, json.loads(body)))
    try:
        writer.start()
        with pytest.raises(wire.WireError, match="values"):
            wire.receive(read)
        writer.join()
    finally:
        os.close(read)
        os.close(write)
    deep = []
    for _ in range(wire.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(wire.WireError, match="deeper"):
        wire.decode(deep, None)

    def exhausted(number):
        raise MemoryError

    with pytest.raises(wire.WireError, match="too large"):
        wire.decode([{"h": "1"}], exhausted)


def test_without_namespaces_what_the_worker_started_dies_with_a_killed_judge(monkeypatch):
    # The worker starts a sleeper, then SIGKILLs the judge (no layer is left to stop it):
    # the parent still kills the sleeper, which is in the run's session.
    marker = f"comlrl-orphan-{uuid.uuid4().hex}"
    setup = (
        "import os, signal, sys\n"
        "if os.fork() == 0:\n"
        f"    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)', {marker!r}])\n"
        "import time\n"
        "time.sleep(0.3)\n"
        "os.kill(os.getppid(), signal.SIGKILL)\n"
        "def f():\n    return 1"
    )
    plan = isolation.Plan((), {"seccomp": False}, {})
    result = _run(setup, plan=plan, monkeypatch=monkeypatch, landlock=False, namespaces=False)
    assert result.fault == "no_verdict"
    deadline = time.monotonic() + 3.0
    while _alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive_with(marker) == []
