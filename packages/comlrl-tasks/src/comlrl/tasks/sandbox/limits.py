"""Resource limits for one sandboxed run of generated code."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from comlrl.core.config.validation import check_bool, check_int, check_number


@dataclass(frozen=True)
class SandboxLimits:
    """How much a sandboxed run may use before it is stopped.

    ``wall_seconds`` bounds the whole run from the parent side: when it passes, the child's whole
    process group is killed. ``test_timeout`` bounds each test inside the child, and after
    ``max_test_timeouts`` timed-out tests the remaining ones are not run. The other limits are
    applied with ``setrlimit`` in the child before any generated code runs.
    ``disk_mb`` and ``max_files`` bound the work dir as a whole (all files together).
    ``namespaces`` asks for fresh user, mount, PID, network and IPC namespaces (``unshare``),
    in which the child sees only the interpreter's files, a private ``/proc`` and a size-limited
    tmpfs work dir; ``landlock`` for the kernel's Landlock confinement of reads, writes, TCP and
    signals; ``python_guard`` for an audit hook that refuses sockets, process creation, and
    file access outside the allowed places. ``cgroup_parent`` names a cgroup v2 directory the
    trainer may make child cgroups in (``memory`` and ``pids`` delegated): each run then gets one
    whose ``memory.max`` bounds the run's total memory (``memory_mb`` + ``disk_mb`` + 64 MiB for
    the judge, shared memory and tmpfs files included) and whose ``pids.max`` is
    ``max_processes`` + 8; by default the trainer's own cgroup is used when its children
    already have both controllers. A layer this OS cannot apply is named in a warning (once per
    process); with ``strict`` the sandbox refuses to run code instead (a missing cgroup only
    warns: the seccomp filter already keeps the run within its per-process limits).
    """

    wall_seconds: float = 30.0
    test_timeout: float = 5.0
    max_test_timeouts: int = 3
    cpu_seconds: int = 20
    memory_mb: int = 1024
    file_size_mb: int = 16
    max_processes: int = 64
    max_open_files: int = 64
    disk_mb: int = 64
    max_files: int = 1024
    namespaces: bool = True
    landlock: bool = True
    python_guard: bool = True
    strict: bool = False
    cgroup_parent: str | None = None

    def __post_init__(self) -> None:
        check_number("sandbox.wall_seconds", self.wall_seconds, 0.0, min_inclusive=False)
        check_number("sandbox.test_timeout", self.test_timeout, 0.0, min_inclusive=False)
        check_int("sandbox.max_test_timeouts", self.max_test_timeouts, 1)
        check_int("sandbox.cpu_seconds", self.cpu_seconds, 1)
        check_int("sandbox.memory_mb", self.memory_mb, 64)
        check_int("sandbox.file_size_mb", self.file_size_mb, 1)
        check_int("sandbox.max_processes", self.max_processes, 1)
        check_int("sandbox.max_open_files", self.max_open_files, 16)
        check_bool("sandbox.namespaces", self.namespaces)
        check_bool("sandbox.landlock", self.landlock)
        check_int("sandbox.disk_mb", self.disk_mb, 1)
        check_int("sandbox.max_files", self.max_files, 16)
        check_bool("sandbox.python_guard", self.python_guard)
        check_bool("sandbox.strict", self.strict)
        if self.cgroup_parent is not None and not (
            isinstance(self.cgroup_parent, str) and self.cgroup_parent.startswith("/")
        ):
            raise ValueError(
                f"sandbox.cgroup_parent must be null or an absolute path to a cgroup v2 "
                f"directory, got {self.cgroup_parent!r}."
            )
        if self.strict:
            off = [n for n in ("namespaces", "landlock", "python_guard") if not getattr(self, n)]
            if off:
                raise ValueError(
                    f"sandbox.strict is true but sandbox.{off[0]} is false: strict needs every "
                    "isolation layer; set strict: false or turn the layer back on."
                )

    @classmethod
    def from_options(cls, options: dict[str, Any] | None) -> SandboxLimits:
        """Build limits from a YAML ``sandbox`` mapping; unknown keys are rejected."""
        if options is None:
            return cls()
        if isinstance(options, SandboxLimits):
            return options
        if not isinstance(options, dict):
            raise ValueError(
                f"sandbox must be a mapping of limit names to values, got {options!r}."
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"sandbox has unknown keys {unknown}; valid keys are {sorted(known)}.")
        return cls(**options)

    def as_dict(self) -> dict[str, Any]:
        """The limits as a plain dict (what the child process receives)."""
        return asdict(self)
