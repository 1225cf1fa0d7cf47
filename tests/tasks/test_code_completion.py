"""Code completion: method split, merge, leveled reward, feedback."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.core.task import TaskSpec
from comlrl.tasks.completion.skeleton import merge, parse_agent_methods
from comlrl.tasks.completion.task import TASK as COMPLETION
from tests.tasks.helpers import FAST_LIMITS

OPTIONS = {"sandbox": dict(FAST_LIMITS)}
AGENT0 = "def average(self):\n    return sum(self.readings) / len(self.readings) if self.readings else None\n"
AGENT1 = (
    "```python\ndef add(self, celsius):\n    self.readings.append(celsius)\n\n"
    "def to_fahrenheit(self, celsius):\n    return celsius * 9 / 5 + 32\n\n"
    "def above(self, threshold):\n    return [r for r in self.readings if r > threshold]\n```"
)


@pytest.fixture(scope="module")
def completion():
    bundle = COMPLETION.build(TaskSpec(external_mode="level_feedback", options=OPTIONS))
    item = next(r for r in bundle.train_dataset if r["class_name"] == "TemperatureLog")
    return bundle, item


def rate(completion, first, second):
    bundle, item = completion
    return bundle.reward_func.breakdown([[first], [second]], batch_items=[item])[0]


def test_methods_are_split_by_arity(completion):
    _, item = completion
    assert item["assignment"] == [["average"], ["add", "to_fahrenheit", "above"]]
    three = COMPLETION.build(TaskSpec(num_agents=3, options={"assignment": "round_robin"}))
    assert len(three.formatters) == 3
    assert sum(len(a) for a in three.train_dataset[1]["assignment"]) == 4


def test_perfect_pair_scores_the_declared_maximum(completion):
    row = rate(completion, AGENT0, AGENT1)
    assert row["total"] == completion[0].reward_func.reward_range[1] == 6.0


def test_missing_method_costs_syntax_and_tests(completion):
    row = rate(completion, "", AGENT1)
    assert row["syntax_level"] == pytest.approx(2.0 * 3 / 4)
    assert row["tests_level"] == pytest.approx(4.0 * 3 / 4)  # the average test fails
    assert row["total"] == pytest.approx(1.5 + 3.0)


def test_syntax_error_in_one_method_keeps_the_others(completion):
    broken = AGENT1.replace("def above(self, threshold):", "def above(self, threshold)")
    row = rate(completion, AGENT0, broken)
    assert row["methods_valid"] == 3
    assert row["syntax_level"] == pytest.approx(1.5)
    assert row["tests_level"] == pytest.approx(3.0)


def test_overlap_is_penalized(completion):
    second = AGENT1.replace("```", "") + "\n\ndef average(self):\n    return 0\n"
    row = rate(completion, AGENT0, second)
    assert row["overlapping"] == 1
    assert row["overlap_level"] == pytest.approx(-0.25)
    assert row["total"] == pytest.approx(6.0 - 0.25)


def test_nothing_usable_scores_zero_and_worst_case_is_the_floor(completion):
    assert rate(completion, "no code", "still no code")["total"] == 0.0
    grabby = (
        "def average(self):\n    return 0\n\ndef add(self, c):\n    pass\n\n"
        "def to_fahrenheit(self, c):\n    return 0\n\ndef above(self, t):\n    return []\n"
    )
    row = rate(completion, grabby, grabby)
    assert row["overlap_level"] == -1.0
    assert row["total"] >= completion[0].reward_func.reward_range[0]


def test_hanging_method_gets_no_test_credit(completion):
    hang = AGENT0.replace("return sum", "while True:\n        pass\n    return sum")
    row = rate(completion, hang, AGENT1)
    assert row["timed_out"] == 1.0
    assert row["tests_passed"] == 2  # both tests that call average() hit the time limit
    assert row["tests_level"] == pytest.approx(2.0)


def test_merge_puts_owner_methods_into_the_skeleton(completion):
    _, item = completion
    found = parse_agent_methods(AGENT1)
    merged = merge(item, found.methods)
    assert "self.readings.append(celsius)" in merged and "class TemperatureLog" in merged
    assert '"""Return the mean reading' in merged


def test_level_feedback_lists_missing_broken_and_failing(completion):
    bundle, item = completion
    prompts = bundle.external_transition(
        prompt=item["prompt"],
        agent_completions=["", AGENT1 + "\ndef average(self): pass"],
        num_agents=2,
    )
    assert "`average`: MISSING" in prompts[0]
    assert "FAILED TemperatureLogTest.test_add_and_average" in prompts[0]
    assert "Tests: 3/4 passed" in prompts[1]


@settings(max_examples=30, deadline=None)
@given(st.text(max_size=200), st.text(max_size=200))
def test_reward_stays_in_range_on_junk(first, second):
    low, high = _JUNK.reward_func.reward_range
    value = _JUNK.reward_func([first], [second], batch_items=[_JUNK.train_dataset[0]])[0]
    assert low <= value <= high


_JUNK = COMPLETION.build(TaskSpec(options=OPTIONS))
