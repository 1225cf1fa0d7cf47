"""The ``vllm`` extra is declared, locked in a fork of its own (a uv conflict with the dev
group), and leaves the default install as it was: no vLLM, the default torch."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]


def export(*args: str) -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    proc = subprocess.run(
        [uv, "export", "--frozen", "--offline", "--no-hashes", "--all-packages", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def torch_pins(text: str) -> set[str]:
    return set(re.findall(r"^torch==([^\s;]+)", text, flags=re.M))


def test_the_extra_is_declared_and_conflicts_with_the_dev_group():
    core = tomllib.loads((ROOT / "packages/comlrl-core/pyproject.toml").read_text())
    assert any(r.startswith("vllm") for r in core["project"]["optional-dependencies"]["vllm"])
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert root["project"]["optional-dependencies"]["vllm"] == ["comlrl-core[vllm]>=0.1,<0.2"]
    conflicts = root["tool"]["uv"]["conflicts"]
    assert [{"package": "comlrl-core", "extra": "vllm"}, {"group": "dev"}] in conflicts


def test_the_default_install_has_no_vllm_and_the_vllm_fork_has_it():
    default = export()
    assert not re.search(r"^vllm==", default, flags=re.M)
    with_vllm = export("--no-dev", "--extra", "vllm")
    assert re.search(r"^vllm==", with_vllm, flags=re.M)
    # vLLM pins its own torch; the default install still gets the newest torch in the lock.
    locked = re.findall(r'name = "torch"\nversion = "([^"]+)"', (ROOT / "uv.lock").read_text())
    assert max(locked, key=version_key) == max(torch_pins(default), key=version_key)
    assert torch_pins(with_vllm)


def version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])
