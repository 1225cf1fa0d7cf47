"""Where training time goes: seconds per phase and generated tokens between two training records.

Every trainer logs ``timing/<phase>`` (seconds) and ``throughput/tokens_per_s`` with its training
metrics. :class:`PhaseTimer` accumulates them and hands them over once per record; evaluation
never counts, as it is not training work and runs at its own cadence.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

DEFAULT_PHASES = ("generate", "reward", "update")


class PhaseTimer:
    """Accumulates wall seconds per named phase and generated tokens until :meth:`drain`.

    ``phases`` fixes the keys every drained record carries, in order (a phase that did not run
    reports 0.0). While :meth:`excluded` is active (evaluation) nothing is recorded.
    """

    def __init__(self, phases: Iterable[str] = DEFAULT_PHASES):
        self.phases = tuple(phases)
        if not self.phases or len(set(self.phases)) != len(self.phases):
            raise ValueError(f"phases must be distinct names, at least one; got {self.phases!r}.")
        self._seconds = dict.fromkeys(self.phases, 0.0)
        self._depth = dict.fromkeys(self.phases, 0)
        self._tokens = 0
        self._excluded = 0

    @property
    def evaluating(self) -> bool:
        """Whether recording is paused (inside :meth:`excluded`)."""
        return self._excluded > 0

    @property
    def tokens(self) -> int:
        """Generated tokens recorded since the last drain."""
        return self._tokens

    def seconds(self, phase: str) -> float:
        """Seconds recorded for ``phase`` since the last drain."""
        return self._seconds[self._known(phase)]

    def _known(self, phase: str) -> str:
        if phase not in self._seconds:
            raise KeyError(f"unknown timing phase {phase!r}; this timer has {self.phases}.")
        return phase

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the block's wall time to ``name``, also when the block raises.

        A block nested in another of the same phase counts once: a family may wrap a call whose
        callee is timed too (e.g. sampling that calls the trainer's timed generation).
        """
        self._known(name)
        outermost = self._depth[name] == 0
        self._depth[name] += 1
        start = time.perf_counter()
        try:
            yield
        finally:
            self._depth[name] -= 1
            if outermost and not self.evaluating:
                self._seconds[name] += time.perf_counter() - start

    def add(self, name: str, seconds: float) -> None:
        """Add ``seconds`` measured elsewhere to ``name`` (ignored during evaluation)."""
        self._known(name)
        if not self.evaluating:
            self._seconds[name] += float(seconds)

    def add_tokens(self, count: int) -> None:
        """Count ``count`` generated tokens towards the throughput (ignored during evaluation)."""
        if not self.evaluating:
            self._tokens += int(count)

    @contextmanager
    def excluded(self) -> Iterator[None]:
        """Record nothing inside the block (re-entrant); used around evaluation."""
        self._excluded += 1
        try:
            yield
        finally:
            self._excluded -= 1

    def drain(self, *, idle_throughput: bool = False) -> dict[str, float]:
        """``timing/<phase>`` for every phase and ``throughput/tokens_per_s`` (tokens over the
        summed phase seconds) since the last drain; then start over from zero.

        With no recorded time the throughput is undefined: it is left out, or reported as 0.0
        when ``idle_throughput`` is set (for records that must always carry the key).
        """
        out = {f"timing/{name}": value for name, value in self._seconds.items()}
        elapsed = sum(self._seconds.values())
        if elapsed > 0:
            out["throughput/tokens_per_s"] = self._tokens / elapsed
        elif idle_throughput:
            out["throughput/tokens_per_s"] = 0.0
        self._seconds = dict.fromkeys(self.phases, 0.0)
        self._tokens = 0
        return out
