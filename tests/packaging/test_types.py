"""comlrl-core type-checks clean under mypy with the repository's configuration
(``[tool.mypy]`` in pyproject.toml: every function body, annotated or not, so the paths that
only a GPU runs — FSDP2, vLLM, the CUDA decode and log-prob kernels — are checked on any
machine). Incremental: mypy's cache makes a rerun quick."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_comlrl_core_has_no_type_errors():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 0 and not errors, result.stdout + result.stderr
