"""The reference package's own venv (``benchmarks/.venv-ref``, git-ignored).

It holds ``comlrl==1.4.3`` with the same torch and transformers versions as our environment, so
a comparison measures the trainers, not the libraries. Created on first use with ``python -m
venv`` and filled with ``uv pip`` (which reuses uv's cache; plain pip is used when uv is absent).

The venv is built in a temporary folder next to its place and moved there only once the
install finished and the marker is written: a failed or killed install (an offline machine
without the wheels, say) never leaves a half-built ``.venv-ref`` that later runs would take
for a working one. A folder without the marker (left by an older version) is rebuilt.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

REFERENCE_VERSION = "1.4.3"
VENV_DIR = Path(__file__).resolve().parent / ".venv-ref"
MARKER_NAME = "comlrl-benchmark.json"
MARKER = VENV_DIR / MARKER_NAME


def pinned_requirements() -> list[str]:
    """The reference release plus our torch/transformers/tokenizers versions."""
    pins = [f"comlrl=={REFERENCE_VERSION}"]
    for name in ("torch", "transformers", "tokenizers"):
        pins.append(f"{name}=={version(name)}")
    return pins


def is_complete(venv: Path = VENV_DIR, wanted: list[str] | None = None) -> bool:
    """Whether ``venv`` is a finished reference venv (for ``wanted``, when given)."""
    marker = venv / MARKER_NAME
    if not (venv / "bin" / "python").exists() or not marker.exists():
        return False
    try:
        recorded = json.loads(marker.read_text()).get("requirements")
    except (OSError, ValueError):
        return False
    return wanted is None or recorded == wanted


def install_command(python: Path, wanted: list[str]) -> list[str]:
    """How to install ``wanted`` into the venv of ``python`` (uv when present, else pip)."""
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--python", str(python), *wanted]
    return [str(python), "-m", "pip", "install", *wanted]


def build_venv(target: Path, wanted: list[str], run=subprocess.run) -> Path:
    """Create the venv for ``wanted`` in a temporary sibling of ``target`` and move it into
    place when complete (replacing what was there); on any failure the temporary folder is
    removed and ``target`` is left as it was. Returns the venv's python."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-building-", dir=target.parent))
    try:
        run([sys.executable, "-m", "venv", str(staging)], check=True)
        run(install_command(staging / "bin" / "python", wanted), check=True)
        (staging / MARKER_NAME).write_text(json.dumps({"requirements": wanted}, indent=2) + "\n")
        if target.exists():
            old = target.with_name(f".{target.name}-old-{os.getpid()}")
            os.replace(target, old)
            shutil.rmtree(old, ignore_errors=True)
        # Only the venv's interpreter is used (``bin/python -m ...``), which finds its
        # site-packages from its own location, so the moved venv works as built.
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target / "bin" / "python"


def reference_python(rebuild: bool = False) -> Path:
    """Path of the reference venv's interpreter, creating or updating the venv if needed."""
    return _venv_python(VENV_DIR, pinned_requirements(), "the reference", rebuild)


# TRL, the single-agent peer of the realsize matrix, in a venv of its own built the same way.
TRL_VERSION = "1.16.0"
TRL_VENV_DIR = VENV_DIR.with_name(".venv-trl")


def trl_requirements() -> list[str]:
    """TRL plus our versions of the libraries it trains with."""
    pins = [f"trl=={TRL_VERSION}"]
    for name in ("torch", "transformers", "tokenizers", "accelerate", "datasets"):
        pins.append(f"{name}=={version(name)}")
    return pins


def trl_python(rebuild: bool = False) -> Path:
    """Path of the TRL venv's interpreter, creating or updating the venv if needed."""
    return _venv_python(TRL_VENV_DIR, trl_requirements(), "TRL", rebuild)


def _venv_python(venv: Path, wanted: list[str], what: str, rebuild: bool) -> Path:
    if not rebuild and is_complete(venv, wanted):
        return venv / "bin" / "python"
    print(f"[benchmarks] installing {what}: {' '.join(wanted)}", file=sys.stderr)
    return build_venv(venv, wanted)


def main() -> int:
    """``python -m benchmarks.refvenv``: build the venv if needed; on failure print one line
    (the GPU check then skips the reference column) and exit 1."""
    try:
        print(reference_python())
    except (subprocess.CalledProcessError, OSError) as exc:
        print(
            f"[benchmarks] reference venv not built ({exc}); its column is skipped", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
