"""Helpers shared by the task tests."""

from __future__ import annotations

from comlrl.core.task import TaskSpec
from comlrl.tasks.sandbox import SandboxLimits

# Short limits keep the attack tests fast; they are still real rlimits and kills. The test
# alarm leaves room for a loaded CI machine: setup code that writes 64 MiB or opens a socket
# measured over 0.5 s there.
FAST_LIMITS = {
    "wall_seconds": 6.0,
    "test_timeout": 2.0,
    "cpu_seconds": 3,
    "memory_mb": 512,
    "file_size_mb": 4,
    "max_processes": 32,
}


def fast_limits(**changes) -> SandboxLimits:
    """Sandbox limits sized for tests, with optional changes."""
    return SandboxLimits(**{**FAST_LIMITS, **changes})


def build(task, **spec_fields):
    """Build ``task`` from a :class:`TaskSpec` with the given fields."""
    return task.build(TaskSpec(**spec_fields))
