"""Download and unpack the reference sdist (``comlrl==1.4.3``) at run time, outside git.

The reference's tests are its authors' code, so they are never committed here: the sdist is
fetched from the package index with pip into a cache directory and unpacked next to it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REFERENCE = "comlrl==1.4.3"
SDIST_NAME = "comlrl-1.4.3.tar.gz"


class FetchError(RuntimeError):
    """The sdist could not be obtained; the message is one line meant for the user."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/comlrl/refsuite`` (``~/.cache`` when unset)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "comlrl" / "refsuite"


def _pip_command() -> list[str]:
    # Our venv has no pip of its own; any pip works, since only the file is wanted.
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        exe = shutil.which(name)
        if exe:
            return [exe]
    uv = shutil.which("uv")
    if uv:
        return [uv, "run", "--no-project", "--with", "pip", "python", "-m", "pip"]
    raise FetchError("refsuite: no pip found (nor uv to run one); pass --sdist PATH instead.")


def download_sdist(cache_dir: Path, timeout: float = 180.0) -> Path:
    """The reference sdist in ``cache_dir``, downloaded with pip when not there yet."""
    target = cache_dir / SDIST_NAME
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        *_pip_command(),
        "download",
        REFERENCE,
        "--no-deps",
        "--no-binary",
        ":all:",
        "--dest",
        str(cache_dir),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise FetchError(
            f"refsuite: downloading {REFERENCE} timed out after {timeout:.0f} s; is the package "
            "index reachable? (or pass --sdist PATH)"
        ) from None
    if proc.returncode != 0 or not target.exists():
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        last = lines[-1] if lines else f"pip exited with {proc.returncode}"
        raise FetchError(
            f"refsuite: could not download {REFERENCE} from the package index ({last}); "
            "check the network or pass --sdist PATH."
        )
    return target


def unpack_tests(sdist: Path, dest: Path) -> Path:
    """Unpack only the sdist's ``tests/`` into ``dest/tests`` and return that directory.

    The reference's own ``comlrl`` package is left out on purpose: it must never shadow ours.
    """
    if not sdist.exists():
        raise FetchError(f"refsuite: no sdist at {sdist}.")
    out = dest / "tests"
    if out.exists():
        shutil.rmtree(out)
    with tarfile.open(sdist) as tar:
        members = []
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) > 2 and parts[1] == "tests" and (member.isfile() or member.isdir()):
                member.name = str(Path(*parts[1:]))
                members.append(member)
        if not members:
            raise FetchError(f"refsuite: {sdist.name} holds no tests/ directory.")
        tar.extractall(dest, members=members, filter="data")
    return out
