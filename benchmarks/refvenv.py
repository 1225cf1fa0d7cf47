"""The reference package's own venv (``benchmarks/.venv-ref``, git-ignored).

It holds ``comlrl==1.4.3`` with the same torch and transformers versions as our environment, so
a comparison measures the trainers, not the libraries. Created on first use with ``python -m
venv`` and filled with ``uv pip`` (which reuses uv's cache; plain pip is used when uv is absent).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

REFERENCE_VERSION = "1.4.3"
VENV_DIR = Path(__file__).resolve().parent / ".venv-ref"
MARKER = VENV_DIR / "comlrl-benchmark.json"


def pinned_requirements() -> list[str]:
    """The reference release plus our torch/transformers/tokenizers versions."""
    pins = [f"comlrl=={REFERENCE_VERSION}"]
    for name in ("torch", "transformers", "tokenizers"):
        pins.append(f"{name}=={version(name)}")
    return pins


def reference_python(rebuild: bool = False) -> Path:
    """Path of the reference venv's interpreter, creating or updating the venv if needed."""
    python = VENV_DIR / "bin" / "python"
    wanted = pinned_requirements()
    if not rebuild and python.exists() and MARKER.exists():
        if json.loads(MARKER.read_text()).get("requirements") == wanted:
            return python
    if rebuild and VENV_DIR.exists():
        shutil.rmtree(VENV_DIR)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV_DIR)], check=True)
    uv = shutil.which("uv")
    if uv:
        cmd = [uv, "pip", "install", "--python", str(python), *wanted]
    else:
        cmd = [str(python), "-m", "pip", "install", *wanted]
    print(f"[benchmarks] installing the reference: {' '.join(wanted)}", file=sys.stderr)
    subprocess.run(cmd, check=True)
    MARKER.write_text(json.dumps({"requirements": wanted}, indent=2) + "\n")
    return python
