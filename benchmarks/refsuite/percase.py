"""Per-test classification of the reference test modules that need stand-ins to import.

Those modules (``test_checkpoint_*.py``) import 1.4.3 internals at import time, which
``plugin/comlrl_refsuite_stubs.py`` replaces with stand-ins, so each of their tests runs and is
classified on its own. A test is **internal** when it uses the reference's internals:

- at run time it used a stand-in (its record lists them), or
- its code, together with every function and class of its module and of the shared test helpers
  (``helpers.py``, ``checkpoint_helpers.py``) that it names, directly or through them, reads,
  writes or overrides a private name (a single leading underscore: ``trainer._x``, ``def _x``
  in a subclass, ``setattr(obj, "_x", ...)``), or assigns the trainer's ``rollout_buffers``.

Every other test of those modules is a public-API test. :func:`entries` turns one run's outcomes
into the classification's internal entries (``"per_test": true``), which ``python -m benchmarks
refsuite --classify`` writes into ``classification.json``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path

HELPER_MODULES = ("helpers.py", "checkpoint_helpers.py")
PER_TEST_FILES = "test_checkpoint_*.py"
# Attributes the reference's tests write although 1.4.3 kept them as trainer internals.
_WRITTEN_INTERNALS = frozenset({"rollout_buffers"})
_PRIVATE = re.compile(r"^_[A-Za-z0-9]\w*$")


def _is_private(name: str) -> bool:
    return bool(_PRIVATE.match(name)) and not name.endswith("__")


class _Definitions:
    """The module-level functions and classes of a module and of the shared helpers."""

    def __init__(self, tests_dir: Path, module: str):
        self.nodes: dict[str, ast.AST] = {}
        for name in (*HELPER_MODULES, module):
            path = tests_dir / name
            if path.exists():
                tree = ast.parse(path.read_text(encoding="utf-8"))
                for node in tree.body:
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        self.nodes[node.name] = node
        self.tree = ast.parse((tests_dir / module).read_text(encoding="utf-8"))


def _uses_in(node: ast.AST) -> tuple[set[str], set[str]]:
    """(private names ``node`` uses, module-level names it refers to)."""
    private: set[str] = set()
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            if _is_private(sub.attr):
                private.add(sub.attr)
            if sub.attr in _WRITTEN_INTERNALS and isinstance(sub.ctx, ast.Store):
                private.add(f"{sub.attr} (written)")
        elif isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.ClassDef) and sub.bases:
            # A subclass's private methods override the base trainer's private hooks.
            for item in sub.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if _is_private(item.name):
                        private.add(item.name)
        elif isinstance(sub, ast.Call) and _callee(sub) in _ATTRIBUTE_CALLS:
            for arg in sub.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    last = arg.value.rsplit(".", 1)[-1]
                    if _is_private(last):
                        private.add(last)  # setattr(obj, "_x", ...), monkeypatch.setattr
    return private, names


_ATTRIBUTE_CALLS = frozenset({"setattr", "getattr", "hasattr", "delattr"})


def _callee(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def private_uses(tests_dir: Path, module: str, function: str) -> list[str]:
    """The private names the test ``function`` of ``module`` uses (see the module docstring)."""
    defs = _Definitions(tests_dir, module)
    start = next(
        (n for n in defs.tree.body if getattr(n, "name", None) == function),
        None,
    )
    if start is None:
        return []
    found: set[str] = set()
    seen: set[str] = set()
    todo = [start]
    while todo:
        node = todo.pop()
        private, names = _uses_in(node)
        found |= private
        for name in names - seen:
            seen.add(name)
            if name in defs.nodes and defs.nodes[name] is not start:
                todo.append(defs.nodes[name])
    # A test's own helpers named with a leading underscore are not the reference's internals.
    return sorted(found - set(defs.nodes))


def _function_of(test_id: str) -> tuple[str, str]:
    module, _, rest = test_id.partition("::")
    return module, re.split(r"[\[:]", rest, maxsplit=1)[0]


def entries(outcomes: Mapping[str, Mapping], tests_dir: Path) -> list[dict]:
    """Internal entries, one per test function of the per-test modules that uses internals,
    with the reason naming what it uses."""
    by_function: dict[str, set[str]] = {}
    for test_id, result in outcomes.items():
        module, function = _function_of(test_id)
        if not Path(module).match(PER_TEST_FILES) or result.get("when") == "collect":
            continue
        used = {f"1.4.3's {name}" for name in result.get("stubs", [])}
        used |= {f"private {name}" for name in private_uses(tests_dir, module, function)}
        if used:
            by_function.setdefault(f"{module}::{function}", set()).update(used)
    return [
        {"id": test, "reason": "uses " + ", ".join(sorted(used)), "per_test": True}
        for test, used in sorted(by_function.items())
    ]
