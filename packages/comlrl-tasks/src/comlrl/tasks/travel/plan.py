"""Plan slots, their owners, parsing of agent JSON, and the deterministic merge."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from comlrl.tasks.common.code_text import extract_code

FIELDS = (
    "current_city",
    "transportation",
    "breakfast",
    "attraction",
    "lunch",
    "dinner",
    "accommodation",
)
AGENT0_FIELDS = ("current_city", "transportation", "accommodation")
AGENT1_FIELDS = ("breakfast", "attraction", "lunch")
EMPTY = "-"


def owner(day: int, slot: str) -> int:
    """Agent 0 owns city, transport and lodging plus dinner on even days; agent 1 the rest."""
    if slot in AGENT0_FIELDS:
        return 0
    if slot in AGENT1_FIELDS:
        return 1
    return 0 if day % 2 == 0 else 1


def owned_slots(agent: int, days: int) -> list[tuple[int, str]]:
    """The (day, field) slots ``agent`` is responsible for."""
    return [(d, f) for d in range(1, days + 1) for f in FIELDS if owner(d, f) == agent]


def normalize_text(value: Any) -> str:
    """Lower-case, single-spaced text; empty markers become ``-``."""
    text = " ".join(str(value).lower().split()).strip(" ;,.")
    return EMPTY if text in ("", "-", "none", "null", "n/a") else text


@dataclass
class AgentPlan:
    """One agent's parsed answer."""

    parsed: bool = False
    entries: dict[tuple[int, str], str] = field(default_factory=dict)
    total: int = 0
    invalid: int = 0
    duplicates: int = 0


def parse_agent_plan(text: str, days: int) -> AgentPlan:
    """Read ``{"agent_id": k, "assignments": [{"day", "field", "value"}, ...]}`` from ``text``."""
    body = extract_code(text)
    start, end = body.find("{"), body.rfind("}")
    plan = AgentPlan()
    if start < 0 or end <= start:
        return plan
    try:
        data = json.loads(body[start : end + 1])
    except (json.JSONDecodeError, RecursionError):
        return plan
    if not isinstance(data, dict) or not isinstance(data.get("assignments"), list):
        return plan
    plan.parsed = True
    for entry in data["assignments"]:
        plan.total += 1
        if not isinstance(entry, dict):
            plan.invalid += 1
            continue
        day, slot, value = entry.get("day"), entry.get("field"), entry.get("value")
        if isinstance(day, str) and re.fullmatch(r"\s*\d+\s*", day):
            day = int(day)
        valid = (
            isinstance(day, int)
            and not isinstance(day, bool)
            and 1 <= day <= days
            and slot in FIELDS
            and isinstance(value, (str, int, float))
        )
        if not valid:
            plan.invalid += 1
        elif (day, slot) in plan.entries:
            plan.duplicates += 1
        else:
            plan.entries[(day, slot)] = str(value)
    return plan


@dataclass
class Merged:
    """The joint plan and what the merge noticed."""

    values: dict[tuple[int, str], str]
    by_owner: set[tuple[int, str]]
    conflicts: int
    overlap_entries: int


def merge_plans(plans: list[AgentPlan], days: int) -> Merged:
    """Owner's value first, else the lowest-numbered agent's; different values are conflicts."""
    values, by_owner, conflicts, overlap = {}, set(), 0, 0
    for day in range(1, days + 1):
        for slot in FIELDS:
            key = (day, slot)
            given = {a: p.entries[key] for a, p in enumerate(plans) if key in p.entries}
            overlap += sum(1 for a in given if a != owner(day, slot))
            if len({normalize_text(v) for v in given.values()}) > 1:
                conflicts += 1
            if owner(day, slot) in given:
                values[key] = given[owner(day, slot)]
                by_owner.add(key)
            elif given:
                values[key] = given[min(given)]
    return Merged(values, by_owner, conflicts, overlap)
