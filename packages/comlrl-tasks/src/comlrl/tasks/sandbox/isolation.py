"""OS-level isolation the parent can arrange before the child starts."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys

_PROBE_TIMEOUT = 15.0


@functools.lru_cache(maxsize=1)
def namespace_prefix() -> tuple[str, ...]:
    """The ``unshare`` command line that gives a child fresh network and PID namespaces.

    Tried once per process: as root, plain ``unshare`` works; as another user, a user namespace
    is needed as well. An empty tuple means this OS allows neither, and the Python guard and
    Landlock are the remaining network barriers.
    """
    exe = shutil.which("unshare")
    if exe is None or not sys.platform.startswith("linux"):
        return ()
    tail = ["--net", "--pid", "--fork", "--kill-child"]
    for head in ([exe], [exe, "--user", "--map-root-user"]):
        command = [*head, *tail, sys.executable, "-I", "-S", "-c", "pass"]
        try:
            probe = subprocess.run(
                command, capture_output=True, timeout=_PROBE_TIMEOUT, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return (*head, *tail)
    return ()


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
