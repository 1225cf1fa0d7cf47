"""The optimizer-step skeleton lives once, in core (comlrl.core.training.train_step): no family module
clears gradients, runs a backward pass or steps an optimizer itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ("comlrl-reinforce", "comlrl-ac", "comlrl-pbrl", "comlrl-tasks")
# The calls of the skeleton: a method name, or a core function called by name.
SKELETON_METHODS = {"backward", "zero_grad"}
SKELETON_FUNCTIONS = {"apply_step", "loss_is_usable"}


def _skeleton_calls(source: str, label: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, label)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in SKELETON_METHODS | {"step"}:
            # `.step()` counts only on something named like an optimizer
            if func.attr == "step" and "opt" not in ast.unparse(func.value).lower():
                continue
            found.append(f"{label}:{node.lineno}: {ast.unparse(func)}()")
        elif isinstance(func, ast.Name) and func.id in SKELETON_FUNCTIONS:
            found.append(f"{label}:{node.lineno}: {func.id}()")
    return found


@pytest.mark.parametrize("package", FAMILIES)
def test_no_family_module_writes_the_step_skeleton(package):
    sources = sorted((ROOT / "packages" / package / "src").rglob("*.py"))
    assert sources
    calls = [c for p in sources for c in _skeleton_calls(p.read_text(), str(p.relative_to(ROOT)))]
    assert not calls, "use comlrl.core.training.train_step.train_step instead:\n" + "\n".join(calls)


def test_the_extending_examples_use_cores_step():
    # what CONTRIBUTING tells a new family to copy follows the same rule
    sources = sorted((ROOT / "examples" / "extending").glob("*.py"))
    assert any(p.name == "custom_algorithm.py" for p in sources)
    calls = [c for p in sources for c in _skeleton_calls(p.read_text(), str(p.relative_to(ROOT)))]
    assert not calls, "use comlrl.core.training.train_step.train_step instead:\n" + "\n".join(calls)


def test_the_check_sees_a_skeleton():
    sample = "def f(opt, loss):\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"
    assert len(_skeleton_calls(sample, "sample.py")) == 3
    assert _skeleton_calls("env.step(action)\n", "sample.py") == []
