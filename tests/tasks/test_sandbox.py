"""The sandbox contains hostile generated code, and batches run on several processes."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from comlrl.tasks.sandbox import (
    ExecJob,
    SandboxError,
    SandboxLimits,
    SandboxPool,
    TestSnippet,
    max_concurrency,
    run_job,
)
from comlrl.tasks.sandbox.isolation import Plan, namespace_prefix, probe_layers, scrubbed_env
from tests.tasks.helpers import fast_limits

REPO = Path(__file__).resolve().parents[2]


def run(code: str, tests: tuple[str, ...] = (), **changes):
    """Run ``code`` (then ``tests``) with fast limits; return (result, seconds)."""
    limits = fast_limits(**changes)
    start = time.monotonic()
    result = run_job(ExecJob(setup=code, tests=tuple(TestSnippet(t) for t in tests)), limits)
    return result, time.monotonic() - start


def landlock_abi() -> int:
    result, _ = run("x = 1")
    return int(result.layers.get("landlock", 0))


def test_ordinary_code_runs_and_tests_are_scored():
    result, _ = run("def f(x):\n    return x + 1", ("assert f(1) == 2", "assert f(1) == 3"))
    assert result.status == "ok"
    assert [t.passed for t in result.tests] == [True, False]
    assert result.tests[1].message == "expected 3, got 2"
    assert result.layers["python_guard"] is True


def test_environment_is_scrubbed(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "secret-token-value")
    env = scrubbed_env("/tmp/x")
    assert "HF_TOKEN" not in env and env["HOME"] == "/tmp/x"
    result, _ = run(
        "import os",
        ("assert 'HF_TOKEN' not in os.environ", "assert os.getcwd() == os.environ['HOME']"),
    )
    assert [t.passed for t in result.tests] == [True, True]


def test_infinite_loop_is_stopped_by_the_test_alarm():
    result, _ = run("while True:\n    pass")
    assert result.status == "setup_error" and result.setup_error_type == "Timeout"


def test_loop_that_swallows_the_alarm_is_killed_by_cpu_or_wall_limit():
    code = (
        "while True:\n    try:\n        while True:\n            pass\n"
        "    except BaseException:\n        continue"
    )
    result, _ = run(code, cpu_seconds=1, wall_seconds=3.0)
    # The judge stops the worker at the test timeout; the CPU and wall limits back it up.
    assert result.status in ("setup_error", "crashed", "killed")
    assert result.status != "setup_error" or result.setup_error_type == "Timeout"
    assert result.passed == 0


@pytest.mark.parametrize(
    "code",
    [
        "x = bytearray(8 * 1024 ** 3)",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(128 * 1024 ** 2))",
    ],
)
def test_memory_exhaustion_is_refused(code):
    result, _ = run(code, test_timeout=3.0)
    assert result.status == "setup_error" and result.setup_error_type == "MemoryError"


def test_fork_is_refused_by_the_guard():
    result, _ = run("import os\nwhile True:\n    os.fork()")
    assert result.setup_error_type == "PermissionError"
    assert "os.fork" in result.setup_error


def _alive_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # the process ended while we looked
            continue
        if marker.encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look for survivors")
def test_fork_bomb_without_the_guard_leaves_no_survivor():
    marker = f"comlrl-bomb-{uuid.uuid4().hex}"
    code = (
        "import os, sys, time\n"
        "for _ in range(40):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', '{marker}'])\n"
        "time.sleep(60)\n"
    )
    result, _ = run(code, python_guard=False, wall_seconds=1.0, test_timeout=30.0)
    assert result.status in ("killed", "crashed")
    deadline = time.monotonic() + 3.0
    while _alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive_with(marker) == []


def test_huge_file_write_is_refused():
    code = "with open('big.bin', 'wb') as f:\n    for _ in range(64):\n        f.write(b'0' * 1024 ** 2)"
    result, _ = run(code, python_guard=False)
    assert result.status == "setup_error"
    assert "File too large" in result.setup_error


class _Listener:
    """A local TCP server that records whether anything connected."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # timeout tick, or closed on stop
                continue
            self.accepted += 1
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener():
    server = _Listener()
    yield server
    server.close()


def _connect_code(port: int) -> str:
    return f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\ns.sendall(b'x')"


def test_network_connection_fails_with_every_layer(listener):
    result, _ = run(_connect_code(listener.port))
    assert result.status == "setup_error"
    assert listener.accepted == 0


def test_network_connection_fails_with_only_the_python_guard(listener):
    result, _ = run(_connect_code(listener.port), namespaces=False, landlock=False)
    assert result.setup_error_type == "PermissionError"
    assert listener.accepted == 0


def test_network_connection_fails_with_only_a_network_namespace(listener):
    if not namespace_prefix():
        pytest.skip("this OS does not allow unshare of a network namespace")
    result, _ = run(_connect_code(listener.port), python_guard=False, landlock=False)
    assert result.layers["namespaces"] is True
    assert result.status == "setup_error" and result.setup_error_type in (
        "OSError",
        "ConnectionRefusedError",
        "TimeoutError",
        "PermissionError",
    )
    assert listener.accepted == 0


def test_writes_outside_the_work_dir_cannot_touch_repo_or_home():
    targets = [
        REPO / f"sandbox-escape-{uuid.uuid4().hex}",
        Path.home() / f"sandbox-escape-{uuid.uuid4().hex}",
    ]
    for target in targets:
        result, _ = run(f"open({str(target)!r}, 'w').write('owned')")
        assert result.setup_error_type == "PermissionError"
        assert not target.exists()
    result, _ = run(f"import os\nos.remove({str(REPO / 'pyproject.toml')!r})")
    assert result.setup_error_type == "PermissionError"
    assert (REPO / "pyproject.toml").is_file()


def test_landlock_alone_blocks_writes_outside_the_work_dir():
    if landlock_abi() < 1:
        pytest.skip("this kernel has no Landlock")
    target = REPO / f"sandbox-escape-{uuid.uuid4().hex}"
    alone = {"python_guard": False, "namespaces": False}
    result, _ = run(f"open({str(target)!r}, 'w').write('owned')", **alone)
    assert result.setup_error_type == "PermissionError"
    assert not target.exists()
    inside, _ = run(
        "open('ok.txt', 'w').write('fine')",
        ("assert open('ok.txt').read() == 'fine'",),
        **alone,
    )
    assert inside.passed == 1


def test_landlock_alone_confines_reads(tmp_path):
    if landlock_abi() < 1:
        # No Landlock here: the gap must at least be known (and so warned about, or refused).
        assert "landlock" in probe_layers(True, True).missing
        return
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the sandbox", encoding="utf-8")
    result, _ = run(f"open({str(secret)!r}).read()", python_guard=False, namespaces=False)
    assert result.setup_error_type == "PermissionError"


def test_a_forged_report_is_ignored():
    code = (
        "import json\nopen('result.json', 'w').write(json.dumps({'nonce': 'guess', "
        "'status': 'ok', 'tests': [{'name': 't', 'passed': True}]}))"
    )
    result, _ = run(code, ("assert False",))
    assert result.passed == 0


def test_code_cannot_remove_what_is_beside_its_work_dir():
    if landlock_abi() < 1:
        pytest.skip("this kernel has no Landlock")
    result, _ = run("import os\nos.rmdir('../root')", python_guard=False, namespaces=False)
    assert result.setup_error_type == "PermissionError"


def test_a_child_that_never_starts_raises_sandbox_error(monkeypatch):
    import comlrl.tasks.sandbox.runner as runner

    monkeypatch.setattr(runner, "plan_for", lambda limits: Plan(("/bin/false",)))
    with pytest.raises(SandboxError, match="ended without a verdict"):
        run("x = 1")


def test_limits_are_validated():
    with pytest.raises(ValueError, match="sandbox.memory_mb"):
        SandboxLimits(memory_mb=1)
    with pytest.raises(ValueError, match="unknown keys"):
        SandboxLimits.from_options({"memroy_mb": 10})
    with pytest.raises(ValueError, match="sandbox workers"):
        SandboxPool(workers=0)


def test_batch_of_32_uses_several_worker_processes():
    pool = SandboxPool(fast_limits(), workers=4)
    jobs = [
        ExecJob(setup=f"value = {i}", tests=(TestSnippet(f"assert value == {i}"),))
        for i in range(32)
    ]
    results = pool.run_many(jobs)
    assert all(r.status == "ok" and r.passed == 1 for r in results)
    assert len(pool.last_batch) == 32
    assert len({r.pid for r in pool.last_batch}) > 1
    assert max_concurrency(pool.last_batch) > 1
    assert os.getpid() not in {r.pid for r in pool.last_batch}
