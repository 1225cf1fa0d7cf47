"""Third round of attacks on the code sandbox, each through the public reward path.

Each hostile sample answers correctly only when its trick worked (the answer is off by one
otherwise), so a contained trick scores the failure value (1.5) and one that got through
scores 4.5. The tricks: switching the Python guard off from inside, making processes,
memory outside the per-process limit (memfd, SysV shared memory), host disk through the output
descriptors (``fallocate``), sockets of other families, verdicts too large or not valid
UTF-8, completions the trainer's own parser chokes on, and redefining a helper the tests call.
"""

from __future__ import annotations

import signal
import warnings

import pytest

from comlrl.core.plugins import load_task
from comlrl.core.task import TaskSpec
from tests.tasks.helpers import FAST_LIMITS

AUX = "def aux(text):\n    return [c for c in text.lower() if c in 'aeiou']"
FAIL, PERFECT = 1.5, 4.5
GUARD_OFF = {"python_guard": False}
MB = 1024 * 1024


@pytest.fixture(scope="module")
def coding():
    task = load_task("coding")
    options = {"sandbox": dict(FAST_LIMITS, disk_mb=8, file_size_mb=2), "sandbox_workers": 2}
    bundle = task.build(TaskSpec(external_mode="level_feedback", options=options))
    item = next(r for r in bundle.train_dataset if r["entry_point"] == "count_vowels")
    return bundle, item


def _quiet():
    """Turning a layer off, or a machine without a run cgroup, warns once per process."""
    context = warnings.catch_warnings()
    context.__enter__()
    warnings.simplefilter("ignore", RuntimeWarning)
    return context


def reward(coding, main: str, options=None, aux: str = AUX, item=None) -> float:
    """``reward_func`` on one (aux, main) pair, with sandbox limits changed by ``options``."""
    bundle, default_item = coding
    pool = bundle.reward_func.scorer.pool
    saved = pool.limits
    if options:
        pool.limits = type(saved)(**{**saved.as_dict(), **options})
    context = _quiet()
    try:
        return bundle.reward_func([aux], [main], batch_items=[item or default_item])[0]
    finally:
        context.__exit__(None, None, None)
        pool.limits = saved


def if_it_worked(trick: str) -> str:
    """A main that answers correctly only when ``trick`` (module-level code) ran through."""
    body = "\n".join("    " + line for line in trick.splitlines())
    return (
        f"try:\n{body}\n    WORKED = True\nexcept BaseException:\n    WORKED = False\n\n"
        "def count_vowels(text):\n    v = aux(text)\n    return len(v) if WORKED else len(v) + 1"
    )


def test_the_trick_harness_scores_a_harmless_trick_as_perfect(coding):
    # The control: what every contained trick below would score had it worked.
    assert reward(coding, if_it_worked("x = 1")) == pytest.approx(PERFECT)
    assert reward(coding, if_it_worked("raise OSError('no')")) == pytest.approx(FAIL)


# Item 1: the guard's state cannot be changed from inside, and the kernel refuses processes.
FORK = "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)"
GUARD_SWITCHED_OFF = {
    "module globals": "import sys\nsys.modules['_guard']._BLOCKED_EVENTS = frozenset()\n",
    "every global": (
        "import sys\ng = sys.modules['_guard']\n"
        "for name in dir(g):\n"
        "    if name.isupper() or name.startswith('_B'):\n"
        "        setattr(g, name, type(getattr(g, name))())\n"
    ),
    "defaults": (
        "import sys\ng = sys.modules['_guard']\n"
        "allow = lambda *args: True\n"
        "g._hook.__defaults__ = tuple(allow if getattr(d, '__name__', '') in "
        "('_inside', '_may_read') else d for d in g._hook.__defaults__)\n"
    ),
    "heap walk": (
        "import gc\n"
        "for o in gc.get_objects():\n"
        "    if callable(o) and getattr(o, '__name__', '') == 'hook':\n"
        "        o.__code__ = (lambda event, args, root=0, readable=0, check=0: None).__code__\n"
    ),
}


@pytest.mark.parametrize(
    "switch_off", list(GUARD_SWITCHED_OFF.values()), ids=list(GUARD_SWITCHED_OFF)
)
def test_the_guard_cannot_be_switched_off_from_inside(coding, switch_off):
    # With every layer on, what a switched-off guard let through before (a process) is refused.
    assert reward(coding, if_it_worked(switch_off + FORK)) == pytest.approx(FAIL)
    # With only the guard in the way (no namespaces, no Landlock), it still refuses a read of
    # a host file after the attempt, whether the attempt raised or not.
    after = f"try:\n{''.join('    ' + ln + chr(10) for ln in switch_off.splitlines())}"
    after += f"except BaseException:\n    pass\nopen({__file__!r}).read()"
    guard_only = {"namespaces": False, "landlock": False}
    assert reward(coding, if_it_worked(after), guard_only) == pytest.approx(FAIL)


def test_the_guard_still_runs_ordinary_library_code(coding):
    # namedtuple sets __defaults__, dataclasses and enum build functions, pathlib opens files.
    ordinary = (
        "import collections, dataclasses, enum, inspect, pathlib, tempfile\n"
        "P = collections.namedtuple('P', 'x y', defaults=(0,))\n"
        "@dataclasses.dataclass\nclass D:\n    a: int = 1\n"
        "class E(enum.Enum):\n    A = 1\n"
        "pathlib.Path('a.txt').write_text('hi')\n"
        "assert open(pathlib.Path('a.txt')).read() == 'hi'\n"
        "with tempfile.NamedTemporaryFile(dir='.') as t:\n    t.write(b'x')\n"
        "assert P(1).y == 0 and D().a == 1 and E.A.value == 1"
    )
    assert reward(coding, if_it_worked(ordinary)) == pytest.approx(PERFECT)


CTYPES = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
PROCESS_TRICKS = {
    "fork": FORK,
    "subprocess": "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'], check=True)",
    "posix_spawn": (
        "import os, sys\n"
        "pid = os.posix_spawn(sys.executable, [sys.executable, '-c', 'pass'], {})\n"
        "os.waitpid(pid, 0)"
    ),
    # clone(SIGCHLD) with no new stack: a fork by the raw system call, not CLONE_THREAD.
    "raw clone": CTYPES
    + (
        "import os, platform\n"
        "number = {'x86_64': 56, 'aarch64': 220}[platform.machine()]\n"
        "pid = libc.syscall(number, 17, 0, 0, 0, 0)\n"
        "if pid == 0:\n    os._exit(0)\n"
        "assert pid > 0\nos.waitpid(pid, 0)"
    ),
}


@pytest.mark.parametrize("trick", list(PROCESS_TRICKS.values()), ids=list(PROCESS_TRICKS))
def test_no_process_can_be_made_without_the_python_guard(coding, trick):
    assert reward(coding, if_it_worked(trick), GUARD_OFF) == pytest.approx(FAIL)


def test_threads_still_work_under_the_filter(coding):
    threads = (
        "import threading\nout = []\n"
        "t = threading.Thread(target=lambda: out.append(1))\nt.start()\nt.join()\n"
        "assert out == [1]"
    )
    assert reward(coding, if_it_worked(threads), GUARD_OFF) == pytest.approx(PERFECT)


SOCKET_TRICKS = {
    "vsock": "import socket\nsocket.socket(40, socket.SOCK_STREAM)",
    "netlink": "import socket\nsocket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)",
    "packet": "import socket\nsocket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)",
    "netlink pair": "import socket\nsocket.socketpair(socket.AF_NETLINK, socket.SOCK_RAW)",
}


@pytest.mark.parametrize("trick", list(SOCKET_TRICKS.values()), ids=list(SOCKET_TRICKS))
def test_no_socket_but_unix_ones_without_the_python_guard(coding, trick):
    assert reward(coding, if_it_worked(trick), GUARD_OFF) == pytest.approx(FAIL)


def test_unix_socket_pairs_still_work(coding):
    pair = "import socket\na, b = socket.socketpair()\na.send(b'x')\nassert b.recv(1) == b'x'"
    assert reward(coding, if_it_worked(pair), GUARD_OFF) == pytest.approx(PERFECT)


# Item 2: memory outside RLIMIT_AS, and the OOM killer's choice. Small sizes: the assertion
# is about the refusal, not about running out of memory.
MEMORY_TRICKS = {
    "memfd": "import os\nfd = os.memfd_create('x')\nos.ftruncate(fd, 4096)\nos.write(fd, b'x')",
    "sysv shm": CTYPES
    + (
        "libc.shmget.restype = ctypes.c_int\n"
        "shm = libc.shmget(0, 4096, 0o1000 | 0o600)\n"
        "assert shm >= 0\nlibc.shmctl(shm, 0, None)"
    ),
    "sysv message queue": CTYPES
    + (
        "libc.msgget.restype = ctypes.c_int\n"
        "queue = libc.msgget(0, 0o1000 | 0o600)\n"
        "assert queue >= 0\nlibc.msgctl(queue, 0, None)"
    ),
    # Twice memory_mb in one request: refused at once by RLIMIT_AS, nothing is touched.
    "over the address-space limit": f"x = bytearray({2 * FAST_LIMITS['memory_mb']} * {MB})",
    "memfd by syscall": CTYPES
    + (
        "import platform\n"
        "number = {'x86_64': 319, 'aarch64': 279}[platform.machine()]\n"
        "assert libc.syscall(number, b'x', 0) >= 0"
    ),
}


def test_memfd_is_refused_with_the_python_guard_on(coding):
    # memfd_create raises no audit event: only the kernel layer can refuse it.
    assert reward(coding, if_it_worked(MEMORY_TRICKS["memfd"])) == pytest.approx(FAIL)


@pytest.mark.parametrize("trick", list(MEMORY_TRICKS.values()), ids=list(MEMORY_TRICKS))
def test_no_memory_outside_the_process_limit_without_the_python_guard(coding, trick):
    assert reward(coding, if_it_worked(trick), GUARD_OFF) == pytest.approx(FAIL)


def test_the_judge_and_worker_are_the_oom_killers_first_choice(coding):
    # Without Landlock and the guard the private /proc can be read; the score stays a
    # failure only when the worker's oom_score_adj is 1000.
    check = "assert open('/proc/self/oom_score_adj').read().strip() != '1000'"
    options = {"python_guard": False, "landlock": False}
    assert reward(coding, if_it_worked(check), options) == pytest.approx(FAIL)


# Item 3: the output descriptors are pipes the parent drains, not host files.
OUTPUT_TRICKS = {
    "stdout is a file": "import os, stat\nassert not stat.S_ISFIFO(os.fstat(1).st_mode)",
    "keep-size fallocate": CTYPES
    + (
        "libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]\n"
        f"assert libc.fallocate(2, 1, 0, {MB}) == 0"
    ),
    "posix_fallocate": f"import os\nos.posix_fallocate(2, 0, {MB})",
    "fallocate in the work dir": (
        f"import os\nfd = os.open('big', os.O_CREAT | os.O_WRONLY)\nos.posix_fallocate(fd, 0, {MB})"
    ),
}


@pytest.mark.parametrize("trick", list(OUTPUT_TRICKS.values()), ids=list(OUTPUT_TRICKS))
def test_no_host_file_behind_the_output_and_no_fallocate(coding, trick):
    assert reward(coding, if_it_worked(trick), GUARD_OFF) == pytest.approx(FAIL)


def test_a_flood_of_output_is_drained_and_capped(coding):
    bundle, item = coding
    # 8 MB on stdout at set-up, then a correct answer: it still scores, and little comes back.
    main = (
        "import sys\nfor _ in range(128):\n    sys.stdout.write('x' * 65536)\n"
        "sys.stdout.flush()\n"
        "def count_vowels(text):\n    v = aux(text)\n    return len(v)"
    )
    assert reward(coding, main, GUARD_OFF) == pytest.approx(PERFECT)
    crash = main + "\n\nraise RuntimeError('after the flood')"
    context = _quiet()
    try:
        _, _, results = bundle.reward_func.scorer.details([AUX], [crash], [item])
    finally:
        context.__exit__(None, None, None)
    assert results[0].status == "setup_error"
    assert 0 < len(results[0].output_tail) <= 2000 and set(results[0].output_tail) == {"x"}


# Item 4: what the verdict carries is bounded and valid UTF-8.
def _raising(name_expr: str, message_expr: str) -> str:
    return (
        f"Big = type({name_expr}, (Exception,), {{}})\n\n"
        "def count_vowels(text):\n    v = aux(text)\n"
        f"    if v is not None:\n        raise Big({message_expr})\n    return len(v)"
    )


HUGE_NAME = _raising("'E' * (15 * 1024 * 1024)", "'m'")
SURROGATE = _raising("'Bad'", "'lone \\ud800 surrogate ' * 3")
HUGE_MESSAGE = _raising("'E'", "'m' * (15 * 1024 * 1024)")


def _feedback(coding, main: str) -> list[str]:
    bundle, item = coding
    context = _quiet()
    try:
        return bundle.external_transition(
            prompt=item["prompt"], agent_completions=[AUX, main], num_agents=2, batch_item=item
        )
    finally:
        context.__exit__(None, None, None)


@pytest.mark.parametrize(
    "main", [HUGE_NAME, SURROGATE, HUGE_MESSAGE], ids=["huge name", "surrogate", "huge message"]
)
def test_the_verdict_and_the_feedback_are_bounded_and_valid_utf8(coding, main):
    bundle, item = coding
    assert reward(coding, main) == pytest.approx(FAIL)
    context = _quiet()
    try:
        _, _, results = bundle.reward_func.scorer.details([AUX], [main], [item])
    finally:
        context.__exit__(None, None, None)
    texts = [t.name for t in results[0].tests] + [t.message for t in results[0].tests]
    texts += [t.error_type or "" for t in results[0].tests]
    assert results[0].tests and sum(len(t) for t in texts) < 1_000_000
    for text in texts:
        text.encode("utf-8")  # raises on a lone surrogate
    prompts = _feedback(coding, main)
    assert len(prompts) == 2
    for prompt in prompts:
        assert len(prompt) < 1_000_000
        prompt.encode("utf-8")
        assert "FAILED" in prompt
    failed = [line for line in prompts[1].splitlines() if line.startswith("- FAILED")]
    assert failed and all(len(line) <= 1000 for line in failed)
    if main is SURROGATE:
        assert "\\ud800" in failed[0]  # shown as text, not dropped


# Item 5: the trainer's own parsing never raises and is linear.
@pytest.mark.parametrize("run", ["1+", "-", "~", "not "], ids=["plus", "minus", "invert", "not"])
def test_a_deeply_nested_completion_is_a_failure_value(coding, run):
    expression = run * 5000 + "1" if run != "1+" else "+".join(["1"] * 5000)
    main = f"def count_vowels(text):\n    v = aux(text)\n    return {expression}"
    # Both definitions with a return, and no parse: level 1 only (0.4 + 0.6).
    assert reward(coding, main) == pytest.approx(1.0)
    prompts = _feedback(coding, main)
    assert "syntax: ERROR" in prompts[1]
    assert "nested too deeply" in prompts[1]


class _TooSlow(Exception):
    pass


def _raise_too_slow(signum, frame):
    raise _TooSlow


def test_a_fence_without_a_newline_is_read_in_linear_time(coding):
    # 600 KB: a quadratic scan needs minutes (60 KB took 4.4 s); a linear one milliseconds.
    # The alarm is a generous bound that only a super-linear scan reaches.
    completion = "```" + " \t" * 300_000
    previous = signal.signal(signal.SIGALRM, _raise_too_slow)
    signal.alarm(60)
    try:
        value = reward(coding, completion)
        prompts = _feedback(coding, completion)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert value == 0.0
    assert all(len(p) < 1_000_000 for p in prompts)


# Item 6: a helper the prompt defines and the tests call is the prompt's, not the sample's.
POLY = {
    "task_id": "HumanEval/32",
    "entry_point": "find_zero",
    "prompt": "import math\n\n\ndef poly(xs: list, x: float):\n"
    '    """Evaluate the polynomial with coefficients xs at x."""\n'
    "    return sum([coeff * math.pow(x, i) for i, coeff in enumerate(xs)])\n\n\n"
    "def find_zero(xs: list):\n"
    '    """Return an x with poly(xs, x) == 0."""\n',
    "test": "import math\n\n\ndef check(candidate):\n"
    "    assert math.fabs(poly([1, 2], candidate([1, 2]))) < 1e-4\n"
    "    assert math.fabs(poly([-6, 11, -6, 1], candidate([-6, 11, -6, 1]))) < 1e-4\n",
}
SHIFT = {
    "task_id": "HumanEval/50",
    "entry_point": "decode_shift",
    "prompt": "def encode_shift(s: str):\n"
    '    """Shift every letter by 5 in the alphabet."""\n'
    '    return "".join([chr(((ord(ch) + 5 - ord("a")) % 26) + ord("a")) for ch in s])\n\n\n'
    "def decode_shift(s: str):\n"
    '    """Decode a string made by encode_shift."""\n',
    "test": "def check(candidate):\n"
    "    assert candidate(encode_shift('hello')) == 'hello'\n"
    "    assert candidate(encode_shift('abcxyz')) == 'abcxyz'\n",
}
AUX_ANY = "def aux(value):\n    return value"


def test_a_redefined_helper_the_tests_call_does_not_pass(coding):
    cheat_poly = (
        "def poly(xs, x):\n    return 0\n\n"
        "def find_zero(xs):\n    x = aux(0.0)\n    return x + 123.0"
    )
    assert reward(coding, cheat_poly, aux=AUX_ANY, item=POLY) == pytest.approx(FAIL)
    cheat_shift = (
        "def encode_shift(s):\n    return s\n\n"
        "def decode_shift(s):\n    t = aux(s)\n    return t + ''"
    )
    assert reward(coding, cheat_shift, aux=AUX_ANY, item=SHIFT) == pytest.approx(FAIL)


def test_a_right_answer_may_call_the_prompts_helper_without_defining_it(coding):
    honest = (
        "def decode_shift(s):\n    t = aux(s)\n"
        '    return "".join([chr(((ord(ch) - 5 - ord("a")) % 26) + ord("a")) for ch in t])'
    )
    assert reward(coding, honest, aux=AUX_ANY, item=SHIFT) == pytest.approx(PERFECT)
    bisect = (
        "def find_zero(xs):\n    lo, hi = aux(-100.0), 100.0\n"
        "    for _ in range(200):\n"
        "        mid = (lo + hi) / 2\n"
        "        if (poly(xs, lo) > 0) == (poly(xs, mid) > 0):\n"
        "            lo = mid\n"
        "        else:\n"
        "            hi = mid\n"
        "    return lo"
    )
    assert reward(coding, bisect, aux=AUX_ANY, item=POLY) == pytest.approx(PERFECT)


def test_the_guards_path_checks_use_nothing_the_sample_can_replace(coding):
    # With only the guard between the sample and the host's files (no namespaces, no
    # Landlock), replacing what os.path.realpath or builtins call must not let a read through.
    host_file = __file__
    patches = {
        "posixpath": "import os, posixpath\n"
        "posixpath._joinrealpath = lambda *args: (os.getcwd(), True)\n",
        "builtins": "import builtins\nbuiltins.type = lambda value: int\n",
    }
    options = {"namespaces": False, "landlock": False}
    # The control: with the guard off too, nothing stops this read.
    read = f"open({host_file!r}).read()"
    assert reward(coding, if_it_worked(read), {**options, **GUARD_OFF}) == pytest.approx(PERFECT)
    for patch in patches.values():
        trick = f"{patch}open({host_file!r}).read()"
        assert reward(coding, if_it_worked(trick), options) == pytest.approx(FAIL)
