"""Normalize tool-use rows: a request, function schemas, and gold calls."""

from __future__ import annotations

import json
from typing import Any


def _maybe_json(value: Any, field: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"tool_use field {field!r} is a string but not JSON: {exc.msg}."
            ) from exc
    return value


def _question(row: dict) -> str:
    for key in ("prompt", "user_prompt", "question"):
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list):  # BFCL: [[{"role": "user", "content": ...}], ...]
            flat = [m for turn in value for m in (turn if isinstance(turn, list) else [turn])]
            texts = [
                m.get("content", "")
                for m in flat
                if isinstance(m, dict) and m.get("role") == "user"
            ]
            if texts:
                return "\n".join(texts)
    raise ValueError(
        f"tool_use dataset row needs the request text in 'prompt', 'user_prompt' or "
        f"'question'; got keys {sorted(row)}."
    )


def _gold(value: Any) -> list[dict]:
    value = _maybe_json(value, "ground_truth")
    if not isinstance(value, list):
        raise ValueError("tool_use field 'ground_truth' must be a list of calls.")
    calls = []
    for entry in value:
        entry = _maybe_json(entry, "ground_truth")
        if isinstance(entry, dict) and "name" in entry:
            name, args = entry["name"], entry.get("arguments", {})
        elif isinstance(entry, dict) and len(entry) == 1:
            ((name, args),) = entry.items()
        else:
            raise ValueError(
                "each tool_use ground_truth call must be {'name': ..., 'arguments': "
                f"{{...}}}} or {{name: {{...}}}}, got {entry!r}."
            )
        args = _maybe_json(args, "ground_truth")
        if not isinstance(args, dict):
            raise ValueError(f"tool_use ground_truth arguments of {name!r} must be a mapping.")
        # Every argument becomes a list of acceptable values.
        options = {
            str(k): (list(v) if isinstance(v, list) and _is_option_list(v) else [v])
            for k, v in args.items()
        }
        calls.append({"name": str(name), "arguments": options})
    return calls


def _is_option_list(values: list) -> bool:
    # BFCL lists acceptable alternatives; a list of scalars is read that way.
    return all(not isinstance(v, (list, dict)) for v in values)


def normalize_tool_row(row: dict) -> dict:
    """Validate and normalize one row to ``prompt``, ``functions``, ``ground_truth``."""
    if not isinstance(row, dict):
        raise ValueError(f"tool_use rows must be mappings, got {type(row).__name__}.")
    functions = _maybe_json(row.get("functions", row.get("function")), "functions")
    if isinstance(functions, dict):
        functions = [functions]
    if not isinstance(functions, list) or not functions:
        raise ValueError(
            "tool_use dataset row needs 'functions' (or 'function'): a non-empty list "
            "of function schemas."
        )
    if "ground_truth" not in row:
        raise ValueError(f"tool_use dataset row needs 'ground_truth'; got keys {sorted(row)}.")
    return {
        **row,
        "prompt": _question(row),
        "functions": functions,
        "ground_truth": _gold(row["ground_truth"]),
    }
