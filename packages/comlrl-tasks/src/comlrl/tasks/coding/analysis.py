"""Static checks of how the main function uses the helper ``aux``."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from comlrl.tasks.common.code_text import find_function

HELPER = "aux"


@dataclass(frozen=True)
class AuxUsage:
    """How the main function treats ``aux``: called at all, result used, or only wrapped."""

    called: bool
    result_ignored: bool
    thin_wrapper: bool


def _is_aux_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == HELPER


def _body_without_docstring(func: ast.FunctionDef) -> list[ast.stmt]:
    body = list(func.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return body


def _is_thin(func: ast.FunctionDef) -> bool:
    body = _body_without_docstring(func)
    if len(body) == 1:
        stmt = body[0]
        return isinstance(stmt, ast.Return) and stmt.value is not None and _is_aux_call(stmt.value)
    if len(body) == 2:
        first, second = body
        return (
            isinstance(first, ast.Assign)
            and len(first.targets) == 1
            and isinstance(first.targets[0], ast.Name)
            and _is_aux_call(first.value)
            and isinstance(second, ast.Return)
            and isinstance(second.value, ast.Name)
            and second.value.id == first.targets[0].id
        )
    return False


def aux_usage(main_code: str, entry_point: str) -> AuxUsage:
    """Inspect ``entry_point`` in ``main_code``; unparsable or missing code counts as no use.

    The result is *ignored* when every ``aux(...)`` call is a bare expression statement. The
    function is a *thin wrapper* when, docstring aside, it only returns ``aux(...)`` (directly
    or through one variable).
    """
    func = find_function(main_code, entry_point)
    if func is None:
        return AuxUsage(False, False, False)
    calls = [node for node in ast.walk(func) if _is_aux_call(node)]
    if not calls:
        return AuxUsage(False, False, False)
    bare = {id(stmt.value) for stmt in ast.walk(func) if isinstance(stmt, ast.Expr)}
    ignored = all(id(call) in bare for call in calls)
    return AuxUsage(True, ignored, _is_thin(func))
