"""Run untrusted generated code in locked-down child processes.

Each run is a judge process that never runs generated code and a fresh worker that does; the
judge runs the tests and compares only plain builtin values the worker returns. Layers, each
independent of the others: a separate session, temp work dir and scrubbed environment; user,
mount, PID, network and IPC namespaces in which only the interpreter's files, a private
``/proc`` and a size-limited tmpfs work dir exist; dropped capabilities; Landlock confinement
of reads, writes, TCP and signals; a nested Landlock domain and a seccomp filter of the
worker's own, so it cannot signal the judge, make processes or namespaces, or hold memory
outside its limits; ``oom_score_adj`` 1000 and, where one can be made, a cgroup v2 bounding the
run's total memory; ``setrlimit`` limits; an audit-hook guard in the worker; output through a
drained pipe; verdicts bounded in size and valid UTF-8; and a SIGKILL of the whole process
group at the wall-clock limit. A sample that breaks the judge after it locked down scores as a failure
(``ExecResult.fault``), never as :class:`SandboxError`. Layers the OS lacks are named in one
warning per process, or refused with ``strict``.
"""

from comlrl.tasks.sandbox.jobs import ExecJob, ExecResult, TestOutcome, TestSnippet
from comlrl.tasks.sandbox.limits import SandboxLimits
from comlrl.tasks.sandbox.pool import SandboxPool, default_workers, max_concurrency
from comlrl.tasks.sandbox.runner import SandboxError, run_job

__all__ = [
    "ExecJob",
    "ExecResult",
    "SandboxError",
    "SandboxLimits",
    "SandboxPool",
    "TestOutcome",
    "TestSnippet",
    "default_workers",
    "max_concurrency",
    "run_job",
]
