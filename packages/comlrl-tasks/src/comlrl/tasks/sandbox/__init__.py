"""Run untrusted generated code in locked-down child processes.

Layers, each independent of the others: a separate process in its own session and temp work
dir with a scrubbed environment; ``setrlimit`` limits (CPU time, address space, file size,
process count, open files) set in the child before generated code runs; fresh network and PID
namespaces via ``unshare`` where the OS allows; Landlock confinement of writes and TCP where the
kernel has it; a Python audit-hook guard that refuses sockets, process creation and writes
outside the work dir; and a SIGKILL of the whole process group when the wall-clock limit passes.
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
