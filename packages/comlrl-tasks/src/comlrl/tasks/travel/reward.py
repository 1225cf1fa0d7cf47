"""The dense joint reward of travel planning (range [-0.5, 1.2]).

  J = sqrt(V * C): V and C are harmonic means over agents of validity (share of well-formed
      entries; 0 when the JSON does not parse) and contribution (share of own slots filled).
  G = 0.2 + 0.8 J gates the plan quality
  P = 0.20 coverage + 0.45 slot quality + 0.05 empty recall + 0.15 balance + 0.10 owned quality
  R = 0.05 A + G * P + 0.20 exact - 0.15 overlap - 0.30 conflict - 0.25 coverage deficit
      - 0.15 invalid - 0.15 duplicates - 0.25 empty mismatch - 0.15 spurious fill
A is the share of agents whose JSON parsed; exact means every merged slot equals the reference
plan's value with no conflict. Slot quality is token F1 against the reference value ("-" only
matches "-"). Balance compares each agent's share of entries with its share of owned slots.
"""

from __future__ import annotations

import math

from comlrl.tasks.travel.plan import (
    EMPTY,
    FIELDS,
    merge_plans,
    normalize_text,
    owned_slots,
    parse_agent_plan,
)

TRAVEL_RANGE = (-0.5, 1.2)
QUALITY = {
    "coverage": 0.20,
    "slot_quality": 0.45,
    "empty_recall": 0.05,
    "balance": 0.15,
    "owned_quality": 0.10,
}
PENALTY = {
    "overlap": 0.15,
    "conflict": 0.30,
    "coverage_deficit": 0.25,
    "invalid": 0.15,
    "duplicates": 0.15,
    "empty_mismatch": 0.25,
    "spurious_fill": 0.15,
}


def similarity(predicted: str | None, target: str) -> float:
    """Token F1 of two slot values; ``-`` matches only ``-``; a missing value scores 0."""
    if predicted is None:
        return 0.0
    got, want = normalize_text(predicted), normalize_text(target)
    if got == want:
        return 1.0
    if EMPTY in (got, want):
        return 0.0
    a, b = got.split(), want.split()
    common = sum(min(a.count(t), b.count(t)) for t in set(a))
    if common == 0:
        return 0.0
    precision, recall = common / len(a), common / len(b)
    return 2 * precision * recall / (precision + recall)


def _harmonic(values: list[float]) -> float:
    if any(v <= 0 for v in values):
        return 0.0
    return len(values) / sum(1 / v for v in values)


def score_plan(texts: list[str], item: dict) -> dict[str, float]:
    """Breakdown of one joint sample; ``total`` is the unclamped reward."""
    days, target = item["days"], item["plan"]
    plans = [parse_agent_plan(t, days) for t in texts]
    merged = merge_plans(plans, days)
    slots = [(d, f) for d in range(1, days + 1) for f in FIELDS]
    want = {(d, f): target[d - 1].get(f, EMPTY) for d, f in slots}
    empty_target = [k for k in slots if normalize_text(want[k]) == EMPTY]
    filled_target = [k for k in slots if k not in empty_target]
    sims = {k: similarity(merged.values.get(k), want[k]) for k in slots}
    predicted_empty = {k for k, v in merged.values.items() if normalize_text(v) == EMPTY}

    validity = [
        (1.0 if p.total == 0 else (p.total - p.invalid) / p.total) if p.parsed else 0.0
        for p in plans
    ]
    contribution = [
        sum(1 for s in owned_slots(a, days) if s in p.entries) / max(1, len(owned_slots(a, days)))
        for a, p in enumerate(plans)
    ]
    joint = math.sqrt(_harmonic(validity) * _harmonic(contribution))
    entries = [len(p.entries) for p in plans]
    expected = [len(owned_slots(a, days)) / len(slots) for a in range(len(plans))]
    balance = 0.0
    if sum(entries):
        balance = max(0.0, 1.0 - sum(abs(n / sum(entries) - e) for n, e in zip(entries, expected)))
    total_entries = sum(p.total for p in plans)
    out = {
        "parsed": sum(p.parsed for p in plans) / len(plans),
        "validity": _harmonic(validity),
        "contribution": _harmonic(contribution),
        "coverage": len(merged.values) / len(slots),
        "slot_quality": sum(sims.values()) / len(slots),
        "empty_recall": (
            sum(1 for k in empty_target if k in predicted_empty) / len(empty_target)
            if empty_target
            else 1.0
        ),
        "balance": balance,
        "owned_quality": sum(sims[k] for k in merged.by_owner) / len(slots),
        "exact": float(
            merged.conflicts == 0
            and all(sims[k] == 1.0 for k in slots)
            and all(
                normalize_text(merged.values.get(k, "")) == normalize_text(want[k]) for k in slots
            )
        ),
        "overlap": merged.overlap_entries / max(1, sum(entries)),
        "conflict": merged.conflicts / len(slots),
        "invalid": sum(p.invalid for p in plans) / max(1, total_entries),
        "duplicates": sum(p.duplicates for p in plans) / max(1, total_entries),
        "empty_mismatch": (
            sum(1 for k in filled_target if k in predicted_empty) / max(1, len(filled_target))
        ),
        "spurious_fill": (
            sum(1 for k in empty_target if k in merged.values and k not in predicted_empty)
            / max(1, len(empty_target))
        ),
    }
    out["coverage_deficit"] = 1.0 - out["coverage"]
    out["gate"] = 0.2 + 0.8 * joint
    quality = sum(QUALITY[k] * out[k] for k in QUALITY)
    out["total"] = (
        0.05 * out["parsed"]
        + out["gate"] * quality
        + 0.20 * out["exact"]
        - sum(PENALTY[k] * out[k] for k in PENALTY)
    )
    return out


def travel_scorer(columns: list[list[str]], items: list[dict]) -> list[dict[str, float]]:
    """Batch scorer: one breakdown per joint sample."""
    return [score_plan([col[j] for col in columns], item) for j, item in enumerate(items)]
