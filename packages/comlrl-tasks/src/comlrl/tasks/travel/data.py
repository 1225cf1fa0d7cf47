"""Normalize travel rows: request, day count, reference plan and optional context."""

from __future__ import annotations

import ast
import json
from typing import Any

from comlrl.tasks.travel.plan import EMPTY, FIELDS


def _parse_plan(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            try:
                return ast.literal_eval(value)  # TravelPlanner stores Python-literal plans
            except (ValueError, SyntaxError) as exc:
                raise ValueError(
                    "travel field 'plan' (or 'annotated_plan') is text that is "
                    "neither JSON nor a Python literal."
                ) from exc
    return value


def normalize_travel_row(row: dict) -> dict:
    """Rows need ``query``/``prompt``, and ``plan``/``annotated_plan`` (a list of day dicts)."""
    if not isinstance(row, dict):
        raise ValueError(f"travel rows must be mappings, got {type(row).__name__}.")
    query = row.get("prompt") or row.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError(
            f"travel dataset row needs the request in 'query' or 'prompt'; got keys {sorted(row)}."
        )
    plan = _parse_plan(row.get("plan", row.get("annotated_plan")))
    if not isinstance(plan, list):
        raise ValueError(
            "travel dataset row needs 'plan' (or 'annotated_plan'): a list of day entries."
        )
    days_list = [d for d in plan if isinstance(d, dict) and any(f in d for f in FIELDS)]
    if not days_list:
        raise ValueError(
            "travel field 'plan' has no day entries with fields such as 'current_city'."
        )
    days = row.get("days") or len(days_list)
    if isinstance(days, bool) or not isinstance(days, int) or days != len(days_list):
        raise ValueError(
            f"travel row: 'days' is {days!r} but the plan has {len(days_list)} day entries."
        )
    clean = [
        {f: str(d.get(f) if d.get(f) not in (None, "") else EMPTY) for f in FIELDS}
        for d in days_list
    ]
    reference = row.get("reference_information")
    if reference is not None and not isinstance(reference, str):
        reference = json.dumps(reference)[:4000]
    return {**row, "prompt": query, "days": days, "plan": clean, "reference_information": reference}
