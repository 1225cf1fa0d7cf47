"""Score a batch of jobs in parallel, each in its own sandboxed process."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from comlrl.core.config.validation import check_int
from comlrl.tasks.sandbox.jobs import ExecJob, ExecResult
from comlrl.tasks.sandbox.limits import SandboxLimits
from comlrl.tasks.sandbox.runner import run_job


def default_workers() -> int:
    """Workers for a batch: the CPUs this process may use, at least 2 and at most 8."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not every OS has sched_getaffinity
        cpus = os.cpu_count() or 1
    return max(2, min(8, cpus))


class SandboxPool:
    """A pool of sandbox worker processes.

    Every job gets a fresh child process (nothing carries over between samples); at most
    ``workers`` of them run at once. Threads only wait on the children, so the parent's GIL is
    not the bottleneck. ``last_batch`` keeps the results of the latest :meth:`run_many` call,
    which lets tests and metrics see how the batch was spread over processes.
    """

    def __init__(self, limits: SandboxLimits | None = None, workers: int | None = None):
        self.limits = limits or SandboxLimits()
        self.workers = (
            check_int("sandbox workers", workers, 1) if workers is not None else default_workers()
        )
        self.last_batch: list[ExecResult] = []
        self._lock = threading.Lock()

    def run(self, job: ExecJob) -> ExecResult:
        """Run one job and return its result."""
        return run_job(job, self.limits)

    def run_many(self, jobs: Sequence[ExecJob | None]) -> list[ExecResult | None]:
        """Run every job in parallel and return the results in order (None stays None)."""
        todo = [(index, job) for index, job in enumerate(jobs) if job is not None]
        results: list[ExecResult | None] = [None] * len(jobs)
        if todo:
            with ThreadPoolExecutor(
                max_workers=min(self.workers, len(todo)), thread_name_prefix="comlrl-sandbox"
            ) as executor:
                done = executor.map(lambda item: (item[0], run_job(item[1], self.limits)), todo)
                for index, result in done:
                    results[index] = result
        with self._lock:
            self.last_batch = [r for r in results if r is not None]
        return results


def max_concurrency(results: Sequence[ExecResult]) -> int:
    """The largest number of runs whose [started, finished] intervals overlap."""
    events = sorted(
        [(r.started, 1) for r in results] + [(r.finished, -1) for r in results],
        key=lambda e: (e[0], e[1]),
    )
    best = current = 0
    for _, delta in events:
        current += delta
        best = max(best, current)
    return best
