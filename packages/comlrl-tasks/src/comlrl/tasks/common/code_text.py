"""Pull Python code out of model output and inspect it without running it."""

from __future__ import annotations

import ast
import re

# The opening line of a fence. One whitespace run, then an optional language and another run:
# written so that no split of a long whitespace run is tried twice (linear time on any text).
_FENCE_OPEN = re.compile(r"```[ \t]*(?:(?:python3?|py)[ \t]*)?\n", re.IGNORECASE)
# What a parser failure other than a SyntaxError means for a completion.
_PARSE_FAILURES = {
    RecursionError: "the code is nested too deeply to parse",
    MemoryError: "the code is too large to parse",
}


def extract_code(text: str) -> str:
    """The first fenced code block of ``text`` if there is one, else ``text``; stripped.

    A block runs from its fence line to the next fence or the end; linear in ``len(text)``.
    """
    match = _FENCE_OPEN.search(text)
    if match is None:
        code = text
    else:
        end = text.find("```", match.end())
        code = text[match.end() : end if end >= 0 else len(text)]
    return code.strip("\n").rstrip()


def parse_code(code: str) -> tuple[ast.Module | None, SyntaxError | None]:
    """(the tree, None) when ``code`` parses, else (None, a SyntaxError saying why); never raises.

    Generated code is input: nesting too deep for the parser, a source too large, null bytes
    or any other parser failure is a failure value, not an exception in the trainer.
    """
    try:
        return ast.parse(code), None
    except SyntaxError as exc:
        return None, exc
    except Exception as exc:  # ValueError (null bytes), RecursionError, MemoryError, ...
        reason = _PARSE_FAILURES.get(type(exc)) or f"{type(exc).__name__}: {exc}"[:200]
        return None, SyntaxError(reason)


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
    """The SyntaxError ``code`` fails to parse with (see :func:`parse_code`), or None."""
    return parse_code(code)[1]


def describe_syntax_error(exc: SyntaxError) -> str:
    """``line L, column C: message`` for feedback prompts."""
    return f"line {exc.lineno}, column {exc.offset}: {exc.msg}"


def find_function(code: str, name: str) -> ast.FunctionDef | None:
    """The last top-level ``def name`` in ``code`` (the one Python would keep), if it parses."""
    tree, _ = parse_code(code)
    if tree is None:
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


def _is_stub(node: ast.stmt) -> bool:
    """A definition with nothing but a docstring, ``pass`` or ``...``: one to be written."""
    if isinstance(node, ast.ClassDef):
        return False
    for stmt in node.body:
        constant = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        if not (constant or isinstance(stmt, ast.Pass)):
            return False
    return True


def prompt_context(source: str, entry_point: str) -> str:
    """The prompt's own helper definitions with its imports, or "" when it defines none.

    Stubs (a docstring and no code) are left out: those are for the sample to write.

    A HumanEval prompt may define functions besides the one to write (``poly`` for
    ``find_zero``, ``encode_cyclic`` for ``decode_cyclic``); the tests call them, so they are
    part of the task: they run where the tests run, and the sample cannot replace them.
    """
    tree, _ = parse_code(source)
    if tree is None:
        return ""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    helpers = [
        n for n in tree.body if isinstance(n, kinds) and n.name != entry_point and not _is_stub(n)
    ]
    if not helpers:
        return ""
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n\n".join(ast.unparse(node) for node in imports + helpers)
