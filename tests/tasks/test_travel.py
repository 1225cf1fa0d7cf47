"""Travel planning: slot ownership, merge, and the dense reward."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.core.task import TaskSpec
from comlrl.tasks.travel.plan import FIELDS, owner
from comlrl.tasks.travel.task import TASK as TRAVEL


@pytest.fixture(scope="module")
def travel():
    bundle = TRAVEL.build(TaskSpec(external_mode="critique"))
    return bundle, bundle.train_dataset[0]


def answer(item, agent, change=None, extra=()):
    entries = [
        {"day": d, "field": f, "value": item["plan"][d - 1][f]}
        for d in range(1, item["days"] + 1)
        for f in FIELDS
        if owner(d, f) == agent
    ]
    if change:
        entries = [change(e) for e in entries]
    return json.dumps({"agent_id": agent, "assignments": entries + list(extra)})


def rate(travel, first, second):
    bundle, item = travel
    return bundle.reward_func.breakdown([[first], [second]], batch_items=[item])[0]


def test_ownership_rule():
    assert owner(1, "current_city") == 0 and owner(1, "lunch") == 1
    assert owner(2, "dinner") == 0 and owner(3, "dinner") == 1


def test_perfect_plan_scores_the_declared_maximum(travel):
    bundle, item = travel
    row = rate(travel, answer(item, 0), answer(item, 1))
    assert row["total"] == bundle.reward_func.reward_range[1] == 1.2
    fenced = rate(travel, "```json\n" + answer(item, 0) + "\n```", answer(item, 1))
    assert fenced["total"] == 1.2


def test_missing_teammate_lowers_coverage_and_gate(travel):
    _, item = travel
    row = rate(travel, answer(item, 0), "")
    assert row["contribution"] == 0.0 and row["gate"] == pytest.approx(0.2)
    assert row["coverage"] < 0.5 and row["exact"] == 0.0
    assert row["total"] < 0.2


def test_conflict_and_overlap_are_penalized(travel):
    _, item = travel
    grab = [{"day": 1, "field": "lunch", "value": "Somewhere Else"}]
    row = rate(travel, answer(item, 0, extra=grab), answer(item, 1))
    assert row["conflict"] > 0 and row["overlap"] > 0
    assert row["slot_quality"] == 1.0  # the owner's value wins the merge
    assert row["exact"] == 0.0  # a conflict forfeits the exact bonus
    assert row["total"] == pytest.approx(
        1.2 - 0.20 - 0.30 * row["conflict"] - 0.15 * row["overlap"] + 0.15 * (row["balance"] - 1.0)
    )


def test_invalid_and_duplicate_entries(travel):
    _, item = travel
    junk = [{"day": 99, "field": "lunch", "value": "x"}, {"day": 1, "field": "snack", "value": "x"}]
    row = rate(travel, answer(item, 0, extra=junk), answer(item, 1))
    assert row["invalid"] > 0 and row["validity"] < 1.0 and row["total"] < 1.2
    dup = [{"day": 1, "field": "current_city", "value": "Elsewhere"}]
    assert rate(travel, answer(item, 0, extra=dup), answer(item, 1))["duplicates"] > 0


def test_empty_slot_mistakes(travel):
    _, item = travel

    def blank(entry):
        return {**entry, "value": "-"}

    row = rate(travel, answer(item, 0, change=blank), answer(item, 1))
    assert row["empty_mismatch"] > 0 and row["slot_quality"] < 1.0


def test_unparsable_answers_score_low_but_in_range(travel):
    bundle, _ = travel
    row = rate(travel, "junk", "junk")
    assert row["parsed"] == 0.0
    assert row["total"] == pytest.approx(-0.25)  # nothing covered: only the coverage deficit
    low, _ = bundle.reward_func.reward_range
    assert bundle.reward_func(["junk"], ["junk"], batch_items=[travel[1]])[0] >= low


def test_critique_mentions_json_and_coverage(travel):
    bundle, item = travel
    prompts = bundle.external_transition(
        prompt=item["prompt"], agent_completions=[answer(item, 0), "junk"], num_agents=2
    )
    assert '"assignments" list' in prompts[1]
    assert "of the plan's slots were filled" in prompts[0]


def test_travel_rows_are_validated():
    with pytest.raises(ValueError, match="'days'"):
        TRAVEL.normalize({"query": "x", "days": 3, "plan": [{"current_city": "A"}]})
    row = TRAVEL.normalize(
        {"query": "x", "annotated_plan": "[{'people_number': 1}, {'days': 1, 'current_city': 'A'}]"}
    )
    assert row["days"] == 1 and row["plan"][0]["lunch"] == "-"


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_reward_stays_in_range_on_junk(first, second):
    low, high = _JUNK.reward_func.reward_range
    value = _JUNK.reward_func([first], [second], batch_items=[_JUNK.train_dataset[0]])[0]
    assert low <= value <= high


_JUNK = TRAVEL.build(TaskSpec())
