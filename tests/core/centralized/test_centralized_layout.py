"""The tagged layout of joint completions: lenient and strict reading, partial credit, rates."""

import pytest

from comlrl.core.centralized import (
    CentralizedCollaboration,
    CentralizedComparatorParseError,
    TaggedCentralizedComparatorAdapter,
)
from comlrl.core.centralized.layout import parse_lenient, parse_strict
from comlrl.core.rewards.ranges import set_reward_range

LENIENT = TaggedCentralizedComparatorAdapter(mode="lenient")
STRICT = TaggedCentralizedComparatorAdapter(mode="strict")


def test_lenient_reads_a_full_layout():
    text = "<agent_0>\nshort\n</agent_0>\n<agent_1>\na longer answer\n</agent_1>"
    layout = LENIENT.parse_layout(text, {}, 2)
    assert layout.outputs == ["short", "a longer answer"]
    assert layout.produced == [True, True] and layout.fraction == 1.0


def test_lenient_continues_the_opened_first_section_without_closing_tags():
    prompt = LENIENT.build_prompt({}, ["p0", "p1"])
    assert prompt.endswith("<agent_0>\n")
    layout = LENIENT.parse_layout("first part\n<agent_1>\nsecond part", {}, 2)
    assert layout.outputs == ["first part", "second part"]
    assert layout.fraction == 1.0


def test_lenient_tags_match_case_and_spacing_loosely():
    text = "< AGENT 0 >  one  </Agent_0>\n<agent-1>two\n<  /agent1 >"
    assert parse_lenient(text, "agent", 2).outputs == ["one", "two"]


def test_lenient_counts_a_missing_role_as_empty():
    layout = LENIENT.parse_layout("only the first role wrote", {}, 3)
    assert layout.outputs == ["only the first role wrote", "", ""]
    assert layout.produced == [True, False, False]
    assert layout.fraction == pytest.approx(1 / 3)
    # a tag written twice in a row opens one section
    twice = LENIENT.parse_layout("a\n<agent_1>\n<agent_1>\nb", {}, 2)
    assert twice.outputs == ["a", "b"]
    # an empty section is not a produced answer
    empty = LENIENT.parse_layout("<agent_0></agent_0><agent_1>b", {}, 2)
    assert empty.produced == [False, True]


@pytest.mark.parametrize("garbage", ["", "   \n ", "<agent_7>zzz", "</agent_1><agent_9>"])
def test_lenient_garbage_is_a_parse_failure(garbage):
    assert LENIENT.parse_layout(garbage, {}, 2).fraction == 0.0
    with pytest.raises(CentralizedComparatorParseError, match="agent_i"):
        LENIENT.parse_completion(garbage, {}, 2)


def test_strict_reads_closed_blocks_only():
    assert not STRICT.build_prompt({}, ["p0", "p1"]).endswith("<agent_0>\n")
    assert TaggedCentralizedComparatorAdapter().mode == "strict"
    closed = "<agent_0>a</agent_0><agent_1>b</agent_1>"
    assert STRICT.parse_completion(closed, {}, 2) == ["a", "b"]
    assert parse_strict("<agent_0>a</agent_0><agent_1>b", "agent", 2).produced == [True, False]
    with pytest.raises(CentralizedComparatorParseError):
        STRICT.parse_completion("a\n<agent_1>\nb", {}, 2)
    with pytest.raises(ValueError, match="adapter mode must be one of"):
        TaggedCentralizedComparatorAdapter(mode="loose")


@pytest.mark.parametrize("adapter", [LENIENT, STRICT])
def test_format_completion_round_trips(adapter):
    outputs = ["one two", "three four five"]
    text = adapter.format_completion(outputs)
    assert adapter.parse_completion(text, {}, 2) == outputs


def _collaboration(adapter):
    def reward(first, second):
        return [float(len(b) > 0) + float(len(a) > 0) for a, b in zip(first, second)]

    return CentralizedCollaboration(adapter, [lambda item: "p", lambda item: "p"], 2, reward)


def test_lenient_reward_is_scaled_by_the_produced_share_of_the_layout():
    collab = _collaboration(LENIENT)
    rewards = collab(["a\n<agent_1>\nb", "a only", ""], batch_items=[{}])
    # full layout: 2 x 1; one role: 1 x 1/2; nothing: 0
    assert rewards == [2.0, 0.5, 0.0]
    stats = collab.stats()
    assert stats["centralized/parse_failure_rate"] == pytest.approx(2 / 3)
    assert stats["centralized/layout_fraction"] == pytest.approx(0.5)
    assert stats["centralized/parse_failures"] == 1.0
    # the rates cover the completions split since the last call only
    collab(["a\n<agent_1>\nb"], batch_items=[{}])
    assert collab.stats()["centralized/parse_failure_rate"] == 0.0
    assert "centralized/parse_failure_rate" not in collab.stats()


def _negative(value, declared=True):
    def reward(first, second):
        return [value] * len(first)

    if declared:
        # the tool-use task's range
        set_reward_range(reward, -0.4, 1.1)
    return CentralizedCollaboration(LENIENT, [lambda item: "p", lambda item: "p"], 2, reward)


def test_partial_credit_starts_at_the_declared_lower_bound():
    collab = _negative(-0.3)
    got = collab(["a\n<agent_1>\nb", "a only", ""], batch_items=[{}])
    # both roles: -0.3; one of two: -0.4 + 0.5·(-0.3 + 0.4); nothing readable: -0.4
    assert got == pytest.approx([-0.3, -0.35, -0.4])
    assert got[0] > got[1] > got[2]


def test_a_negative_reward_without_a_declared_range_raises():
    collab = _negative(-0.3, declared=False)
    with pytest.raises(ValueError, match="declares no reward_range"):
        collab(["a only"], batch_items=[{}])
    # non-negative rewards are measured from 0 as before
    assert _negative(0.8, declared=False)(["a only"], batch_items=[{}]) == [0.4]


def test_strict_reward_is_not_scaled_and_recording_can_pause():
    collab = _collaboration(STRICT)
    collab.recording = lambda: False
    assert collab(["<agent_0>a</agent_0>"], batch_items=[{}]) == [1.0]
    assert "centralized/parse_failure_rate" not in collab.stats()
