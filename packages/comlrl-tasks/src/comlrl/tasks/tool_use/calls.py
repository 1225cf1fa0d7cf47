"""Parse function calls out of model output (JSON or Python call syntax) and compare them."""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass
from typing import Any

from comlrl.tasks.common.code_text import extract_code, parse_code

OPTIONAL = ""  # BFCL marks an argument that may be left out with "" among its acceptable values


@dataclass(frozen=True)
class Call:
    """One function call: a name and keyword arguments."""

    name: str
    arguments: tuple[tuple[str, Any], ...]

    @property
    def args(self) -> dict[str, Any]:
        """The arguments as a dict."""
        return dict(self.arguments)

    def key(self) -> str:
        """A canonical text form, used to spot the same call made twice."""
        return self.name + json.dumps(normalize_value(self.args), sort_keys=True, default=str)


def normalize_value(value: Any) -> Any:
    """Case- and space-insensitive strings, floats for numbers, recursively for containers."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return " ".join(value.lower().split())
    if isinstance(value, (list, tuple)):
        return [normalize_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): normalize_value(v) for k, v in value.items()}
    return str(value)


def values_match(predicted: Any, acceptable: list[Any]) -> bool:
    """Whether ``predicted`` equals one of the ``acceptable`` values after normalization."""
    got = normalize_value(predicted)
    for option in acceptable:
        want = normalize_value(option)
        if isinstance(got, float) and isinstance(want, float):
            if math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9):
                return True
        elif got == want:
            return True
    return False


def _make_call(name: Any, arguments: Any) -> Call | None:
    if not isinstance(name, str) or not name.strip():
        return None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return None
    try:
        frozen = tuple(sorted((str(k), v) for k, v in arguments.items()))
    except TypeError:
        return None
    return Call(name.strip(), frozen)


def _calls_from_json(data: Any) -> list[Call] | None:
    if isinstance(data, dict):
        for key in ("calls", "tool_calls", "function_calls"):
            if isinstance(data.get(key), list):
                return _calls_from_json(data[key])
        data = [data]
    if not isinstance(data, list):
        return None
    calls = []
    for entry in data:
        if not isinstance(entry, dict):
            return None
        if isinstance(entry.get("function"), dict):  # OpenAI-style {"function": {...}}
            entry = entry["function"]
        if "name" in entry:
            args = next((entry[k] for k in ("arguments", "parameters", "args") if k in entry), {})
            call = _make_call(entry["name"], args)
        elif len(entry) == 1:  # BFCL-style {"func": {"arg": value}}
            ((name, args),) = entry.items()
            call = _make_call(name, args)
        else:
            call = None
        if call is None:
            return None
        calls.append(call)
    return calls


def _json_candidates(text: str) -> list[str]:
    out = [text]
    for opener, closer in (("[", "]"), ("{", "}")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            out.append(text[start : end + 1])
    return out


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _calls_from_python(text: str, schemas: dict[str, list[str]]) -> list[Call] | None:
    tree, _ = parse_code(text.strip())
    if tree is None:
        return None
    nodes: list[ast.AST] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return None
        value = stmt.value
        nodes += list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else [value]
    calls = []
    for node in nodes:
        if not isinstance(node, ast.Call):
            return None
        name = _dotted(node.func)
        if name is None:
            return None
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
            order = schemas.get(name, [])
            for position, arg in enumerate(node.args):
                key = order[position] if position < len(order) else f"arg{position}"
                args[key] = ast.literal_eval(arg)
        except (ValueError, SyntaxError, TypeError):
            return None
        call = _make_call(name, args)
        if call is None:
            return None
        calls.append(call)
    return calls


def parse_calls(text: str, schemas: dict[str, list[str]] | None = None) -> list[Call] | None:
    """The calls in ``text``, or None when it is neither a JSON call list nor Python calls.

    ``schemas`` maps function names to their parameter order, so positional arguments in
    Python syntax get their names. An explicit empty list ``[]`` parses as no calls.
    """
    body = extract_code(text).strip()
    if not body:
        return None
    for candidate in _json_candidates(body):
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, RecursionError):
            continue
        calls = _calls_from_json(data)
        if calls is not None:
            return calls
    return _calls_from_python(body, schemas or {})
