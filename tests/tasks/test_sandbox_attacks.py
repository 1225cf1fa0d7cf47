"""One test per attack class on the code sandbox, through the coding task's reward.

Each attack is the body of the main agent's function. Every test asserts that the trainer (this
process) survives, that the reward is the documented failure value (1.5 for a pair with both
functions and valid syntax that passes no test, 1.3 after a timeout), that nothing the trainer
holds (a secret file under a temp HOME, an environment variable) reaches the result, and that
nothing outside the work dir changed.
"""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path

import pytest

from comlrl.core.task import TaskSpec
from comlrl.tasks.coding.task import TASK as CODING
from comlrl.tasks.sandbox.isolation import probe_layers
from tests.tasks.helpers import FAST_LIMITS

AUX = "def aux(text):\n    return [c for c in text.lower() if c in 'aeiou']"
SENTINEL = f"comlrl-sentinel-{uuid.uuid4().hex}"
FAIL, FAIL_TIMEOUT = 1.5, 1.3


@pytest.fixture(scope="module")
def coding():
    options = {"sandbox": dict(FAST_LIMITS, disk_mb=8, file_size_mb=2), "sandbox_workers": 2}
    bundle = CODING.build(TaskSpec(options=options))
    item = next(r for r in bundle.train_dataset if r["entry_point"] == "count_vowels")
    return bundle, item


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A temp HOME with a secret file, and the secret in the trainer's environment."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "secret.txt").write_text(SENTINEL, encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("COMLRL_TEST_SECRET", SENTINEL)
    return home


def _snapshot(root: Path) -> dict:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def attack(coding, home: Path, body: str, options=None):
    """Score ``body`` as the main function; return (reward row, sandbox result)."""
    bundle, item = coding
    scorer = bundle.reward_func.scorer
    indented = "\n".join("    " + line for line in body.splitlines())
    main = f"def count_vowels(text):\n    v = aux(text)\n{indented}\n    return len(v)"
    before = _snapshot(home)
    if options:
        saved = scorer.pool.limits
        scorer.pool.limits = type(saved)(**{**saved.as_dict(), **options})
    try:
        with warnings.catch_warnings():
            # Turning a layer off warns once per process; test_sandbox_layers.py checks that.
            warnings.simplefilter("ignore", RuntimeWarning)
            rows, _, results = scorer.details([AUX], [main], [item])
    finally:
        if options:
            scorer.pool.limits = saved
    assert os.getpid() > 0 and threading.main_thread().is_alive()  # the trainer is still here
    assert _snapshot(home) == before  # nothing outside the work dir changed
    assert SENTINEL not in repr(results[0])  # nothing the trainer holds came back
    assert rows[0]["tests_passed"] == 0 and rows[0]["syntax_ok"] == 1.0
    return rows[0], results[0]


def test_reading_a_file_outside_the_work_dir_is_refused(coding, home):
    path = str(home / "secret.txt")
    row, _ = attack(coding, home, f"return open({path!r}).read()")
    assert row["total"] == pytest.approx(FAIL)
    # The OS layers alone (no Python guard) hide the file as well.
    row, result = attack(coding, home, f"return open({path!r}).read()", {"python_guard": False})
    assert row["total"] == pytest.approx(FAIL)
    plan = probe_layers(True, True)
    assert plan.layers.get("hide_tree") or "hide_tree" in plan.missing


def test_the_trainers_environment_is_not_visible_through_proc(coding, home):
    body = (
        "import os\nfound = []\n"
        f"for pid in ['self', str(os.getppid()), {str(os.getpid())!r}]:\n"
        "    try:\n"
        "        found.append(open('/proc/' + pid + '/environ', 'rb').read())\n"
        "    except OSError as exc:\n"
        "        found.append(repr(exc))\n"
        "return repr(found) + repr(dict(os.environ))"
    )
    for options in (None, {"python_guard": False}):
        row, _ = attack(coding, home, body, options)
        assert row["total"] == pytest.approx(FAIL)


def test_many_small_files_cannot_exceed_the_disk_quota(coding, home):
    # 2 MB per file is under file_size_mb; 40 of them are ten times disk_mb (8 MB).
    body = (
        "written = 0\n"
        "for i in range(40):\n"
        "    with open(f'part{i}.bin', 'wb') as f:\n"
        "        f.write(b'0' * (2 * 1024 ** 2 - 4096))\n"
        "    written += 1\n"
        "return written"
    )
    for options in (None, {"namespaces": False}):
        row, result = attack(coding, home, body, options)
        # The tmpfs quota fails the write (ENOSPC); the host-dir watch kills the run (a timeout).
        assert row["total"] in (pytest.approx(FAIL), pytest.approx(FAIL_TIMEOUT))
        assert result.status in ("ok", "killed")
        message = " ".join([result.setup_error or ""] + [t.message for t in result.tests])
        assert "got 40" not in message


def test_walking_the_stack_to_the_reporter_forges_nothing(coding, home):
    # Looks in every frame for a report and a way to send it (as an in-process harness has),
    # forges a full pass, and also writes a fake verdict to every open descriptor.
    body = (
        "import sys, json, os\n"
        "fake = [{'name': 't', 'passed': True}] * 20\n"
        "f = sys._getframe()\n"
        "while f is not None:\n"
        "    names = dict(f.f_globals)\n"
        "    names.update(f.f_locals)\n"
        "    report = names.get('report')\n"
        "    if isinstance(report, dict):\n"
        "        report.update(status='ok', tests=fake)\n"
        "        if callable(names.get('finish')):\n"
        "            names['finish']()\n"
        "    f = f.f_back\n"
        "line = json.dumps({'status': 'ok', 'tests': fake}).encode()\n"
        "for fd in range(64):\n"
        "    try:\n"
        "        os.write(fd, line)\n"
        "    except OSError:\n"
        "        continue\n"
        "return -1"
    )
    row, result = attack(coding, home, body)
    assert row["total"] == pytest.approx(FAIL)
    assert not any(t.passed for t in result.tests)


@pytest.mark.parametrize(
    "cheat",
    [
        "class Yes:\n    def __eq__(self, other):\n        return True\n"
        "    def __bool__(self):\n        return True\nreturn Yes()",
        "class Int(int):\n    def __eq__(self, other):\n        return True\nreturn Int(0)",
        "class Str(str):\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = str.__hash__\nreturn Str('x')",
    ],
    ids=["object", "int subclass", "str subclass"],
)
def test_an_always_equal_object_does_not_pass(coding, home, cheat):
    row, _ = attack(coding, home, cheat)
    assert row["total"] == pytest.approx(FAIL)


def test_a_cpu_loop_is_stopped(coding, home):
    body = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        continue"
    row, result = attack(coding, home, body)
    assert row["total"] == pytest.approx(FAIL_TIMEOUT)
    assert result.timed_out


def test_a_memory_bomb_is_refused(coding, home):
    body = "chunks = []\nwhile True:\n    chunks.append(bytearray(128 * 1024 ** 2))"
    row, _ = attack(coding, home, body)
    # MemoryError, or the test timeout when a loaded machine is slow to fill the pages.
    assert row["total"] in (pytest.approx(FAIL), pytest.approx(FAIL_TIMEOUT))


def _alive_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:  # the process ended while we looked
                continue
    return found


def _no_survivor(marker: str) -> bool:
    deadline = time.monotonic() + 3.0
    while _alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive_with(marker) == []


def test_a_fork_bomb_is_refused_and_leaves_no_process(coding, home):
    marker = f"comlrl-bomb-{uuid.uuid4().hex}"
    body = (
        "import os, sys\n"
        "for _ in range(30):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        f"            os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)', '{marker}'])\n"
        "    except OSError:\n"
        "        break\n"
        "return -1"
    )
    for options in (None, {"python_guard": False}):
        row, _ = attack(coding, home, body, options)
        assert row["total"] in (pytest.approx(FAIL), pytest.approx(FAIL_TIMEOUT))
        assert _no_survivor(marker)


class _Servers:
    """A TCP and a Unix-socket server that count connections."""

    def __init__(self, unix_path: Path):
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(str(unix_path))
        self.accepted = 0
        for server in (self.tcp, self.unix):
            server.listen(4)
            server.settimeout(0.1)
        self.port, self._stop = self.tcp.getsockname()[1], threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            for server in (self.tcp, self.unix):
                try:
                    conn, _ = server.accept()
                except OSError:  # timeout tick, or closed on stop
                    continue
                self.accepted += 1
                conn.close()

    def close(self):
        self._stop.set()
        self._thread.join()
        self.tcp.close()
        self.unix.close()


def test_network_tcp_and_unix_sockets_are_unreachable(coding, home, tmp_path):
    servers = _Servers(tmp_path / "s.sock")
    body = (
        "import socket\nerrors = []\n"
        f"for family, address in ((socket.AF_INET, ('127.0.0.1', {servers.port})), "
        f"(socket.AF_UNIX, {str(tmp_path / 's.sock')!r})):\n"
        "    try:\n"
        "        s = socket.socket(family)\n"
        "        s.settimeout(1)\n"
        "        s.connect(address)\n"
        "        s.sendall(b'x')\n"
        "    except OSError as exc:\n"
        "        errors.append(repr(exc))\n"
        "return errors"
    )
    try:
        for options in (None, {"python_guard": False}):
            row, _ = attack(coding, home, body, options)
            assert row["total"] == pytest.approx(FAIL)
        assert servers.accepted == 0
    finally:
        servers.close()


def test_signals_to_the_trainer_do_not_arrive(coding, home):
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda *args: received.append(args))
    body = (
        "import os, signal\n"
        f"for pid in (os.getppid(), {os.getpid()}):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGUSR1)\n"
        "    except OSError:\n"
        "        continue\n"
        "return -1"
    )
    try:
        for options in (None, {"python_guard": False}):
            row, _ = attack(coding, home, body, options)
            assert row["total"] == pytest.approx(FAIL)
        time.sleep(0.2)  # a delivered signal would have run the handler by now
        assert received == []
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_leftover_daemon_is_killed(coding, home):
    marker = f"comlrl-daemon-{uuid.uuid4().hex}"
    body = (
        "import os, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)', '{marker}'])\n"
        "    os._exit(0)\n"
        "return -1"
    )
    row, _ = attack(coding, home, body, {"python_guard": False})
    assert row["total"] == pytest.approx(FAIL)
    assert _no_survivor(marker)


@pytest.mark.parametrize("exit_call", ["import sys\nsys.exit(0)", "import os\nos._exit(0)"])
def test_exiting_early_does_not_pass(coding, home, exit_call):
    row, _ = attack(coding, home, exit_call)
    assert row["total"] == pytest.approx(FAIL)


def test_a_printed_success_marker_does_not_pass(coding, home):
    body = (
        "import json, sys\n"
        "print('OK all tests passed')\n"
        "sys.stdout.write(json.dumps({'status': 'ok', 'tests': [{'name': 't', 'passed': True}]}))\n"
        "open('result.json', 'w').write('{\"status\": \"ok\"}')\n"
        "return -1"
    )
    row, _ = attack(coding, home, body)
    assert row["total"] == pytest.approx(FAIL)


UNITTESTS = """
import unittest

class TestBox(unittest.TestCase):
    def test_value(self):
        self.assertEqual(Box().value(), 5)

    def test_truth(self):
        self.assertTrue(Box().value())

    def test_raises(self):
        with self.assertRaises(ValueError):
            Box().fail()
"""


def test_unittest_jobs_do_not_trust_generated_equality_or_truth(home):
    from comlrl.tasks.sandbox import ExecJob, run_job
    from tests.tasks.helpers import fast_limits

    cheat = (
        "class Yes:\n    def __eq__(self, other):\n        return True\n"
        "    def __bool__(self):\n        return True\n"
        "class Box:\n    def value(self):\n        return Yes()\n"
        "    def fail(self):\n        raise ValueError('expected by the test')\n"
    )
    result = run_job(ExecJob(setup=cheat, unittest_source=UNITTESTS), fast_limits())
    passed = {t.name: t.passed for t in result.tests}
    assert passed == {
        "TestBox.test_raises": True,
        "TestBox.test_truth": False,
        "TestBox.test_value": False,
    }


# Second round: samples that try to crash the judge or to score by shadowing what the tests
# call. Each is scored in one batch with an honest sample, which must keep its own score.
HONEST_MAIN = "def count_vowels(text):\n    v = aux(text)\n    return len(v)"
WRONG_MAIN = "def count_vowels(text):\n    v = aux(text)\n    return len(v) + 1"


def _signal_the_judge(calls: str) -> str:
    """A wrong main whose module first runs ``calls`` (refusals are what the sample expects)."""
    body = "\n".join("    " + line for line in calls.splitlines())
    return f"import os, fcntl, signal\ntry:\n{body}\nexcept OSError:\n    pass\n{WRONG_MAIN}"


def _ready_frame(nodes: int) -> str:
    """A wrong main that writes a "ready" frame of ``nodes`` 60-deep nested lists itself."""
    return (
        "import os, struct, sys\n"
        "nest = b'[' * 60 + b']' * 60 + b','\n"
        f'body = b\'{{"ready":{{"x":[\' + nest * {nodes} + b\'[]]}},"handles":0}}\'\n'
        "fd = sys.modules['__main__'].REPLIES\n"
        "view = memoryview(struct.pack('>I', len(body)) + body)\n"
        "while view:\n"
        "    view = view[os.write(fd, view):]\n"
        "os._exit(0)\n" + WRONG_MAIN
    )


TRUNCATE = {
    "task_id": "HumanEval/2",
    "entry_point": "truncate_number",
    "prompt": "def truncate_number(number: float) -> float:\n"
    '    """Return the decimal part of a positive float."""\n',
    # HumanEval/2's check, as the dataset ships it.
    "test": "METADATA = {\n    'author': 'jt',\n    'dataset': 'test'\n}\n\n\n"
    "def check(candidate):\n"
    "    assert candidate(3.5) == 0.5\n"
    "    assert abs(candidate(1.33) - 0.33) < 1e-6\n"
    "    assert abs(candidate(123.456) - 0.456) < 1e-6\n",
}
# (aux, main, item or None for count_vowels) of each class; a wrong answer in every one.
HOSTILE = {
    "pidfd": (
        AUX,
        _signal_the_judge("signal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGINT)"),
        None,
    ),
    # F_SETSIG is 10 on Linux; the fcntl module does not name it.
    "setown": (
        AUX,
        _signal_the_judge(
            "r, w = os.pipe()\n"
            "fcntl.fcntl(r, fcntl.F_SETOWN, os.getppid())\n"
            "fcntl.fcntl(r, 10, signal.SIGINT)\n"
            "fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)\n"
            "os.write(w, b'x')"
        ),
        None,
    ),
    "forged_module": (
        AUX,
        "import sys\nsys.modules['__main__']._exports = "
        "lambda ns, o: {'count_vowels': {'m': ''}, 'x': {'m': ''}}\n" + WRONG_MAIN,
        None,
    ),
    # About 16 MB: the judge would need several GB to decode it.
    "nested_frame": (AUX, _ready_frame((16 * 1024 * 1024 - 64) // 121), None),
    "shadowed_builtin": (
        "def aux(number):\n    return number * 0",
        "def abs(x):\n    return 0\n\n"
        "def truncate_number(number):\n    v = aux(number)\n    return v + number",
        TRUNCATE,
    ),
}


def _batch(coding, hostile: list[tuple[str, str, dict | None]]):
    """Score hostile samples and an honest one in one batch; return the hostile rows/results."""
    bundle, default_item = coding
    scorer = bundle.reward_func.scorer
    auxes = [aux for aux, _, _ in hostile] + [AUX]
    mains = [main for _, main, _ in hostile] + [HONEST_MAIN]
    items = [item or default_item for _, _, item in hostile] + [default_item]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rows, _, results = scorer.details(auxes, mains, items)
    honest = rows[-1]
    assert honest["total"] == pytest.approx(4.5) and honest["sandbox_fault"] == 0.0
    assert honest["tests_passed"] == honest["tests_total"] > 0
    return rows[:-1], results[:-1]


def test_sigint_to_the_judge_through_a_pidfd_is_a_failure(coding):
    [row], _ = _batch(coding, [HOSTILE["pidfd"]])
    assert row["total"] == pytest.approx(FAIL) and row["tests_passed"] == 0


def test_sigint_to_the_judge_through_fcntl_setown_is_a_failure(coding):
    [row], _ = _batch(coding, [HOSTILE["setown"]])
    assert row["total"] == pytest.approx(FAIL) and row["tests_passed"] == 0


def test_a_forged_export_of_an_unimportable_module_is_a_failure(coding):
    [row], [result] = _batch(coding, [HOSTILE["forged_module"]])
    assert row["total"] == pytest.approx(FAIL) and row["tests_passed"] == 0
    assert row["sandbox_fault"] == row["fault_bad_export"] == 1.0
    assert result.fault == "bad_export"


def test_a_huge_deeply_nested_ready_frame_is_a_failure(coding):
    [row], [result] = _batch(coding, [HOSTILE["nested_frame"]])
    assert row["total"] == pytest.approx(FAIL) and row["tests_passed"] == 0
    assert row["sandbox_fault"] == row["fault_bad_reply"] == 1.0
    assert result.fault == "bad_reply"


def test_a_shadowed_builtin_does_not_pass_the_tests_that_call_it(coding):
    [row], _ = _batch(coding, [HOSTILE["shadowed_builtin"]])
    # The wrong answer fails every assert against the real abs (with the sample's, two pass).
    assert row["tests_passed"] == 0 and row["tests_total"] == 3
    assert row["total"] == pytest.approx(FAIL)


def _children() -> list[int]:
    """Processes whose parent is this one (the sandbox children of the trainer)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # the process ended while we looked
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.append(int(entry.name))
    return found


# 200 is the acceptance run (COMLRL_SANDBOX_LEAK_CALLS=200, a few minutes on 2 cores); CI runs
# fewer, since every call is five sandboxed runs plus an honest one.
LEAK_CALLS = int(os.environ.get("COMLRL_SANDBOX_LEAK_CALLS", "8"))


def test_reward_calls_with_every_hostile_class_leave_nothing_behind(coding, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # only this test's run dirs land here
    hostile = dict(HOSTILE)
    # Over the decoder's node bound in a quarter of the bytes: the same class, cheaper to send.
    hostile["nested_frame"] = (AUX, _ready_frame(2_100_000 // 60), None)
    _batch(coding, list(hostile.values()))  # warm-up: the pool's first use opens what it keeps
    fds = sorted(os.listdir("/proc/self/fd"))
    # Other tests in this worker process may own long-lived children (pools, servers); only
    # children that appear during the calls count.
    before = set(_children())
    for _ in range(LEAK_CALLS):
        rows, _ = _batch(coding, list(hostile.values()))
        assert all(row["total"] == pytest.approx(FAIL) for row in rows)
    deadline = time.monotonic() + 5.0  # a judge that just sent its verdict may still be exiting
    while set(_children()) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(set(_children()) - before) == []
    assert list(tmp_path.iterdir()) == []
    assert sorted(os.listdir("/proc/self/fd")) == fds
