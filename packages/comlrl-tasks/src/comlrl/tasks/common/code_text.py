"""Pull Python code out of model output and inspect it without running it."""

from __future__ import annotations

import ast
import re

_FENCE_RE = re.compile(
    r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE
)


def extract_code(text: str) -> str:
    """The first fenced code block of ``text`` if there is one, else ``text``; stripped."""
    match = _FENCE_RE.search(text)
    code = match.group(1) if match else text
    return code.strip("\n").rstrip()


def defines_function(code: str, name: str) -> bool:
    """Whether ``code`` has a ``def name(`` line (a text check that works on broken code)."""
    return (
        re.search(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(", code, re.MULTILINE)
        is not None
    )


def has_any_function_with_return(code: str) -> bool:
    """Whether ``code`` defines some function and contains a ``return`` (the format gate)."""
    has_def = re.search(r"^[ \t]*def[ \t]+\w+[ \t]*\(", code, re.MULTILINE) is not None
    return has_def and re.search(r"\breturn\b", code) is not None


def syntax_error(code: str) -> SyntaxError | None:
    """The SyntaxError ``code`` raises when parsed, or None when it parses."""
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return exc
    except ValueError as exc:  # null bytes in the source
        return SyntaxError(str(exc))
    return None


def describe_syntax_error(exc: SyntaxError) -> str:
    """``line L, column C: message`` for feedback prompts."""
    return f"line {exc.lineno}, column {exc.offset}: {exc.msg}"


def find_function(code: str, name: str) -> ast.FunctionDef | None:
    """The last top-level ``def name`` in ``code`` (the one Python would keep), if it parses."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = node
    return found


def import_lines(source: str) -> str:
    """The top-level import statements of ``source`` (e.g. ``from typing import List``)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        lines = [ln for ln in source.splitlines() if re.match(r"^(?:import|from)\s+\w", ln)]
        return "\n".join(lines)
    return "\n".join(
        ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
    )
