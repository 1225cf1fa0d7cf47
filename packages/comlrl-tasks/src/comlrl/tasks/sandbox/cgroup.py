"""A cgroup v2 per sandboxed run: the run's total memory and task count, counted by the kernel.

``RLIMIT_AS`` bounds each process's address space, not what the run holds in all: shared
memory, tmpfs pages and several processes escape it. A cgroup's ``memory.max`` counts all of
it, and ``pids.max`` every task (threads included). It needs a cgroup v2 directory this process
may create children in, with the ``memory`` and ``pids`` controllers enabled for them: the
``cgroup_parent`` limit, or else the trainer's own cgroup when that one allows it (a cgroup
with processes in it usually cannot enable controllers for children). Without one the seccomp
filter's refusals (no new processes, no memfd or SysV shared memory) keep the run within its
per-process limits, and the missing layer is named like any other.
"""

from __future__ import annotations

import functools
import os
import time
import uuid
from pathlib import Path

_CONTROLLERS = ("memory", "pids")
_EMPTY_WAIT = 2.0
# What the judge itself may use beyond the worker's limit (an interpreter and the tests).
JUDGE_MB = 64


def _cgroup2_mount() -> str | None:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            for line in handle:
                head, _, tail = line.partition(" - ")
                if tail.split(" ", 1)[0] == "cgroup2":
                    return head.split()[4]
    except OSError:  # no /proc: not Linux
        return None
    return None


def _own_cgroup(mount: str) -> str | None:
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("0::"):
                    return os.path.join(mount, line[3:].strip().lstrip("/"))
    except OSError:  # no /proc: not Linux
        return None
    return None


def _read(path: str) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read()


@functools.lru_cache(maxsize=4)
def find_parent(configured: str | None) -> tuple[str, str]:
    """(a cgroup v2 directory runs can be made in, "") or ("", why there is none here)."""
    if configured:
        parent = configured
    else:
        mount = _cgroup2_mount()
        if mount is None:
            return "", "no cgroup v2 hierarchy is mounted"
        parent = _own_cgroup(mount)
        if parent is None:
            return "", "this process is in no cgroup v2"
    try:
        available = _read(os.path.join(parent, "cgroup.controllers")).split()
        missing = [c for c in _CONTROLLERS if c not in available]
        if missing:
            return "", (
                f"cgroup v2 {parent} has no {' or '.join(missing)} controller (a cgroup v1 "
                "hierarchy holds it, or it is not delegated); set sandbox.cgroup_parent"
            )
        enabled = _read(os.path.join(parent, "cgroup.subtree_control")).split()
        wanted = " ".join(f"+{c}" for c in _CONTROLLERS if c not in enabled)
        if wanted and not configured:
            # The trainer's own cgroup is not changed behind its owner's back.
            return "", (
                f"the controllers are not enabled for children of {parent}; "
                "set sandbox.cgroup_parent to a delegated cgroup v2 directory"
            )
        if wanted:
            with open(os.path.join(parent, "cgroup.subtree_control"), "w") as handle:
                handle.write(wanted)
        probe = Path(parent) / f"comlrl-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return "", (
            f"cannot make child cgroups with memory and pids under {parent} ({exc.strerror or exc}); "
            "set sandbox.cgroup_parent to a delegated cgroup v2 directory"
        )
    return parent, ""


class RunCgroup:
    """One run's cgroup: made before the judge starts (the judge moves itself in), killed and
    removed after the run."""

    def __init__(self, parent: str, memory_bytes: int, max_tasks: int):
        self.path = os.path.join(parent, f"comlrl-sandbox-{os.getpid()}-{uuid.uuid4().hex}")
        self.closed = False
        os.mkdir(self.path)
        try:
            self._write("memory.max", str(memory_bytes))
            if os.path.exists(os.path.join(self.path, "memory.swap.max")):
                self._write("memory.swap.max", "0")
            self._write("pids.max", str(max_tasks))
        except OSError:
            os.rmdir(self.path)
            raise

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w", encoding="ascii") as handle:
            handle.write(value)

    def _events(self, name: str) -> dict[str, int]:
        try:
            lines = _read(os.path.join(self.path, name)).splitlines()
        except OSError:  # already removed
            return {}
        pairs = (line.split() for line in lines)
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the run for going over ``memory.max``."""
        return self._events("memory.events").get("oom_kill", 0) > 0

    def close(self) -> bool:
        """Kill every process left in the run (``cgroup.kill``, else one by one) and remove the
        cgroup; False when it could not be removed."""
        if self.closed:
            return True
        self.closed = True
        deadline = time.monotonic() + _EMPTY_WAIT
        while self._events("cgroup.events").get("populated", 0):
            if os.path.exists(os.path.join(self.path, "cgroup.kill")):
                self._write("cgroup.kill", "1")
            else:
                for pid in _read(os.path.join(self.path, "cgroup.procs")).split():
                    try:
                        os.kill(int(pid), 9)
                    except ProcessLookupError:  # ended meanwhile
                        continue
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        try:
            os.rmdir(self.path)
        except OSError:  # a process stuck in the kernel; each run makes a fresh cgroup anyway
            return False
        return True
