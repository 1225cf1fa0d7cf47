"""Split a HumanEval-style ``check(candidate)`` test into separately scored snippets."""

from __future__ import annotations

import ast

from comlrl.tasks.sandbox import TestSnippet

_NAME_LIMIT = 160


def _has_assert(node: ast.AST) -> bool:
    return any(isinstance(child, ast.Assert) for child in ast.walk(node))


def _label(stmt: ast.stmt) -> str:
    text = ast.unparse(stmt).splitlines()[0]
    return text if len(text) <= _NAME_LIMIT else text[: _NAME_LIMIT - 3] + "..."


def test_snippets(test_source: str, entry_point: str) -> list[TestSnippet]:
    """Snippets for the sandbox: context statements, then one scored snippet per assert block.

    Module-level statements of the test (imports, constants) and ``candidate = <entry_point>``
    run first as unscored context. Inside ``check``, every top-level statement that contains an
    ``assert`` is one scored test; other statements are unscored context kept in order.
    """
    try:
        tree = ast.parse(test_source)
    except SyntaxError as exc:
        raise ValueError(
            f"coding dataset field 'test' does not parse: {exc.msg} (line {exc.lineno})."
        ) from exc
    check = None
    snippets: list[TestSnippet] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            check = node
        else:
            snippets.append(TestSnippet(ast.unparse(node), name="setup", counts=False))
    if check is None:
        raise ValueError("coding dataset field 'test' must define 'def check(candidate): ...'.")
    param = check.args.args[0].arg if check.args.args else "candidate"
    snippets.append(TestSnippet(f"{param} = {entry_point}", name="bind candidate", counts=False))
    for stmt in check.body:
        counted = _has_assert(stmt)
        snippets.append(
            TestSnippet(
                ast.unparse(stmt), name=_label(stmt) if counted else "setup", counts=counted
            )
        )
    if not any(s.counts for s in snippets):
        raise ValueError("coding dataset field 'test' has no assert inside check(candidate).")
    return snippets


def slice_tests(snippets: list[TestSnippet], limit: int | None) -> list[TestSnippet]:
    """Keep every context snippet and the first ``limit`` scored ones (last ``-limit`` if negative)."""
    if limit is None or limit == 0:
        return snippets
    counted = [i for i, s in enumerate(snippets) if s.counts]
    keep = set(counted[:limit] if limit > 0 else counted[limit:])
    return [s for i, s in enumerate(snippets) if not s.counts or i in keep]
