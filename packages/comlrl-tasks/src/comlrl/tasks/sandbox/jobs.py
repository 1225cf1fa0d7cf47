"""What is sent into the sandbox and what comes back."""

from __future__ import annotations

from dataclasses import dataclass, field

# How a sample can break the sandbox rather than just fail its tests: the judge ended without a
# verdict after it was locked down (killed or interrupted), the worker sent a malformed or
# oversized reply, it exported a name the judge refuses (a module off the allow-list), or the
# judge itself raised while handling the worker's data.
FAULTS = ("no_verdict", "bad_reply", "bad_export", "judge_error")


@dataclass(frozen=True)
class TestSnippet:
    """One statement block run after the setup code, in the same namespace.

    ``counts`` is False for context statements (assignments a test needs); those are run but
    are not scored. ``name`` is what feedback shows for a failing test.
    """

    __test__ = False  # not a pytest test class, despite the name

    code: str
    name: str = ""
    counts: bool = True


@dataclass(frozen=True)
class ExecJob:
    """Code to run in one sandboxed child.

    ``setup`` is executed first (the agents' merged code). Then either each of ``tests`` runs in
    order, or, when ``unittest_source`` is given, that module source is executed and every
    ``unittest.TestCase`` method it defines runs as one test. The tests see only
    ``entry_point`` and the names they read that are neither builtins nor their own imports,
    so the setup cannot change what ``abs`` or ``len`` mean to them. ``context`` is trusted
    source of the task itself (a prompt's helper functions with its imports) that the judge runs
    before the tests: the names it defines are the ones the tests see, whatever the setup
    defines under the same names.
    """

    setup: str
    tests: tuple[TestSnippet, ...] = ()
    unittest_source: str | None = None
    entry_point: str | None = None
    context: str = ""


@dataclass(frozen=True)
class TestOutcome:
    """The result of one scored test."""

    __test__ = False  # not a pytest test class, despite the name

    name: str
    passed: bool
    timed_out: bool = False
    error_type: str | None = None
    message: str = ""


@dataclass
class ExecResult:
    """What a sandboxed run produced.

    ``status`` is ``"ok"`` when the judge ran the tests, ``"setup_error"`` when the agents'
    code raised (or timed out) before any test ran, ``"killed"`` when the parent stopped the
    run at ``wall_seconds`` or because the work dir outgrew ``disk_mb``, and ``"crashed"`` when
    the worker died during setup without a report (for example on the CPU-time limit).
    ``fault`` names how the sample broke the sandbox itself, when it did (one of
    :data:`FAULTS`); the sample then scores as a failure.
    """

    status: str
    tests: list[TestOutcome] = field(default_factory=list)
    setup_error: str | None = None
    setup_error_type: str | None = None
    pid: int = 0
    started: float = 0.0
    finished: float = 0.0
    returncode: int | None = None
    output_tail: str = ""
    layers: dict = field(default_factory=dict)
    fault: str | None = None

    @property
    def passed(self) -> int:
        """How many scored tests passed."""
        return sum(1 for t in self.tests if t.passed)

    @property
    def timed_out(self) -> bool:
        """Whether any time limit fired (a test's or the whole run's)."""
        return self.status == "killed" or any(t.timed_out for t in self.tests)


def fault_metrics(result: ExecResult | None) -> dict[str, float]:
    """``sandbox_fault`` and one ``fault_<reason>`` per reason in :data:`FAULTS`, each 0 or 1."""
    fault = result.fault if result is not None else None
    out = {"sandbox_fault": float(fault is not None)}
    out.update({f"fault_{name}": float(fault == name) for name in FAULTS})
    return out
