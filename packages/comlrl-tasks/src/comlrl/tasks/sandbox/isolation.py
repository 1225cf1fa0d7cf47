"""Which OS isolation layers this machine allows, found once per process by a probe child.

Layers the OS cannot apply are named in one warning per process (never silently weaker);
with ``strict`` limits the sandbox refuses to run generated code instead.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

from comlrl.tasks.sandbox.cgroup import find_parent
from comlrl.tasks.sandbox.limits import SandboxLimits

HARNESS = Path(__file__).with_name("_harness.py")
_PROBE_TIMEOUT = 20.0
_NAMESPACES = ("--user", "--map-root-user", "--mount", "--pid", "--net", "--ipc")
# What each layer protects, for the warning when it is missing.
LAYER_ROLES = {
    "namespaces": "user/mount/PID/network namespaces via unshare (no network, own PIDs)",
    "hide_tree": "mount namespace hiding the file tree, private /proc and tmpfs disk quota",
    "privileges": "dropped capabilities and an undumpable judge process",
    "landlock": "Landlock confinement of reads and writes",
    "landlock_net": "Landlock denial of TCP (needs Landlock ABI 4)",
    "landlock_scope": "Landlock scoping of signals and abstract sockets (needs ABI 6; the "
    "worker's seccomp filter still refuses signals to the judge, and the network namespace "
    "hides the host's abstract sockets, where present)",
    "python_guard": "the Python audit-hook guard",
    "seccomp": "the worker's seccomp filter (no new processes, memfd or SysV shared memory, "
    "fallocate, non-Unix sockets, unshare, mount, ptrace, pidfd_* or signals outside its own "
    "process group)",
    "oom": "oom_score_adj 1000 for the judge and worker (the OOM killer picks them first)",
    "cgroup": "a cgroup v2 per run bounding its total memory and tasks (the seccomp filter's "
    "refusals still keep each run within its per-process limits)",
}
# Missing, these only warn, also with strict: others stand in for them.
NOT_REQUIRED = frozenset({"cgroup"})
_warned: set[tuple[str, ...]] = set()
_lock = threading.Lock()


class SandboxError(RuntimeError):
    """The sandbox itself could not start or lock down a child (not the generated code's fault)."""


@dataclass(frozen=True)
class Plan:
    """The layers a run asks the child for, and those that are missing (with the reason)."""

    prefix: tuple[str, ...]
    layers: dict = field(default_factory=dict)
    missing: dict = field(default_factory=dict)
    cgroup: str = ""


def namespace_prefix() -> tuple[str, ...]:
    """The ``unshare`` command line of fresh user, mount, PID, network and IPC namespaces.

    Always with a user namespace, so even a trainer running as root gives the child only
    capabilities inside its own namespaces (and the child then drops those too). Empty when
    this OS has no usable ``unshare``.
    """
    return _probe_prefix()


@functools.lru_cache(maxsize=1)
def _probe_prefix() -> tuple[str, ...]:
    exe = shutil.which("unshare")
    if exe is None or not sys.platform.startswith("linux"):
        return ()
    prefix = (exe, *_NAMESPACES, "--fork", "--kill-child")
    try:
        probe = subprocess.run(
            [*prefix, sys.executable, "-I", "-S", "-c", "pass"],
            capture_output=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return prefix if probe.returncode == 0 else ()


@functools.lru_cache(maxsize=4)
def probe_layers(namespaces: bool, landlock: bool) -> Plan:
    """Start one child that tries every layer and reports which ones this OS allowed."""
    prefix = namespace_prefix() if namespaces else ()
    missing: dict[str, str] = {}
    if namespaces and not prefix:
        missing["namespaces"] = "unshare of user namespaces is not available here"
        missing["hide_tree"] = "needs the namespaces"
    wanted = {"hide_tree": bool(prefix), "privileges": bool(prefix), "landlock": landlock}
    wanted["seccomp"] = wanted["oom"] = True
    if not sys.platform.startswith("linux"):
        wanted = {}
        missing["privileges"] = missing["seccomp"] = missing["oom"] = "not Linux"
        if landlock:
            missing["landlock"] = "not Linux"
    run_dir = Path(tempfile.mkdtemp(prefix="comlrl-sandbox-probe-"))
    try:
        (run_dir / "work").mkdir()
        (run_dir / "root").mkdir()
        job = {
            "probe": True,
            "layers": wanted,
            "workdir": str(run_dir / "work"),
            "newroot": str(run_dir / "root"),
            "limits": SandboxLimits().as_dict(),
        }
        command = [*prefix, sys.executable, "-I", "-S", "-B", str(HARNESS)]
        try:
            done = subprocess.run(
                command,
                input=json.dumps(job).encode("utf-8"),
                capture_output=True,
                timeout=_PROBE_TIMEOUT,
                check=False,
                cwd=run_dir / "work",
            )
            report = json.loads(done.stdout.decode("utf-8") or "{}")
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            raise SandboxError(f"the sandbox probe child failed: {exc}") from exc
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    if report.get("status") != "ok":
        raise SandboxError(f"the sandbox probe child failed: {report.get('setup_error')}")
    missing.update(report.get("missing", {}))
    layers = {name: on and name not in missing for name, on in wanted.items()}
    abi = int(report.get("layers", {}).get("landlock", 0) or 0)
    if landlock and abi:
        if abi < 4:
            missing["landlock_net"] = f"Landlock ABI {abi}"
        if abi < 6:
            # Still covered: signals by the worker's seccomp filter, abstract sockets by the
            # network namespace (each where present).
            missing["landlock_scope"] = f"Landlock ABI {abi}"
    # The namespaces still isolate network and PIDs when the new root could not be built.
    return Plan(prefix, layers, missing)


def plan_for(limits: SandboxLimits) -> Plan:
    """The layers to apply for ``limits``; warns once about what is missing, or refuses (strict)."""
    found = probe_layers(limits.namespaces, limits.landlock)
    missing = dict(found.missing)
    for name in ("namespaces", "landlock", "python_guard"):
        if not getattr(limits, name):
            missing[name] = f"turned off by sandbox.{name}: false"
    parent, why = find_parent(limits.cgroup_parent)
    if why:
        missing["cgroup"] = why
    required = {name: why for name, why in missing.items() if name not in NOT_REQUIRED}
    if required and limits.strict:
        raise SandboxError(
            "sandbox.strict is set and these isolation layers are not available: "
            + describe(required)
            + ". Code rewards are not run; use a Linux kernel with user namespaces and "
            "Landlock, or set sandbox.strict: false."
        )
    key = tuple(sorted(missing))
    with _lock:
        fresh = missing and key not in _warned
        _warned.add(key)
    if fresh:
        warnings.warn(
            "the code sandbox runs without these layers (the remaining ones still apply): "
            + describe(missing)
            + ". Set task.options.sandbox.strict: true to refuse instead.",
            RuntimeWarning,
            stacklevel=3,
        )
    return replace(found, cgroup=parent)


def describe(missing: dict) -> str:
    """Name each missing layer with what it protects and why it is missing."""
    return "; ".join(f"{LAYER_ROLES.get(n, n)} [{n}: {why}]" for n, why in sorted(missing.items()))


def scrubbed_env(workdir: str) -> dict[str, str]:
    """A minimal environment: no tokens, proxies or Python path settings reach the child."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
    }
