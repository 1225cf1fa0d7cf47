"""Tool use: call parsing and the flat reward, term by term."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.core.task import TaskSpec
from comlrl.tasks.tool_use.calls import parse_calls
from comlrl.tasks.tool_use.data import normalize_tool_row
from comlrl.tasks.tool_use.task import TASK as TOOLS

OSLO = {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}
LIMA = {"name": "get_weather", "arguments": {"city": "Lima", "unit": "celsius"}}


def js(*calls):
    return json.dumps(list(calls))


@pytest.fixture(scope="module")
def tools():
    bundle = TOOLS.build(TaskSpec(external_mode="critique"))
    return bundle, bundle.train_dataset[0]


def rate(tools, *texts):
    bundle, item = tools
    return bundle.reward_func.breakdown([[t] for t in texts], batch_items=[item])[0]


def test_parser_reads_json_and_python_calls():
    assert parse_calls(js(OSLO))[0].args == {"city": "Oslo", "unit": "celsius"}
    assert parse_calls('{"calls": [{"name": "f", "arguments": "{\\"a\\": 1}"}]}')[0].args == {
        "a": 1
    }
    assert parse_calls('[{"f": {"a": 1}}]')[0].name == "f"
    py = parse_calls("get_weather('Oslo', unit='celsius')", {"get_weather": ["city", "unit"]})
    assert py[0].args == {"city": "Oslo", "unit": "celsius"}
    assert parse_calls("[]") == []
    assert parse_calls("no calls here") is None
    assert parse_calls("") is None


def test_perfect_split_scores_the_declared_maximum(tools):
    row = rate(tools, js(OSLO), js(LIMA))
    assert row["total"] == tools[0].reward_func.reward_range[1] == 1.1


def test_one_agent_doing_everything_is_unbalanced_and_lazy(tools):
    row = rate(tools, js(OSLO, LIMA), "[]")
    assert row["exact"] == 1.0 and row["balance"] == 0.0 and row["lazy"] == 0.5
    assert row["total"] == pytest.approx(1.1 - 0.15 - 0.15 * 0.5)


def test_duplicated_call_is_overlap(tools):
    row = rate(tools, js(OSLO), js(OSLO))
    assert row["overlap"] == 1.0 and row["calls_predicted"] == 1
    expected = 0.05 + 0.25 * (2 / 3) + 0.35 * 0.5 + 0.10 * 0.5 + 0.15 * 1.0 - 0.20
    assert row["total"] == pytest.approx(expected)


def test_wrong_argument_and_extra_call(tools):
    wrong = {"name": "get_weather", "arguments": {"city": "Lima", "unit": "kelvin"}}
    row = rate(tools, js(OSLO), js(wrong))
    assert row["arguments"] == pytest.approx(0.75) and row["exact"] == 0.0
    extra = {"name": "convert_currency", "arguments": {"amount": 1}}
    row = rate(tools, js(OSLO), js(LIMA, extra))
    assert row["extra"] == pytest.approx(0.5) and row["count"] == pytest.approx(2 / 3)


def test_optional_argument_may_be_left_out(tools):
    row = rate(tools, js({"name": "get_weather", "arguments": {"city": "oslo"}}), js(LIMA))
    assert row["arguments"] == 1.0 and row["exact"] == 1.0


def test_unparsable_output_reaches_the_floor(tools):
    row = rate(tools, "junk", "junk")
    assert row["parse"] == 0.0 and row["total"] == pytest.approx(-0.15)


def test_bfcl_style_rows_are_normalized():
    row = normalize_tool_row(
        {
            "question": [[{"role": "user", "content": "Weather in Rome?"}]],
            "function": json.dumps([{"name": "get_weather", "parameters": {}}]),
            "ground_truth": [json.dumps({"get_weather": {"city": ["Rome", "rome"]}})],
        }
    )
    assert row["prompt"] == "Weather in Rome?"
    assert row["ground_truth"] == [{"name": "get_weather", "arguments": {"city": ["Rome", "rome"]}}]
    with pytest.raises(ValueError, match="ground_truth"):
        normalize_tool_row({"prompt": "x", "functions": [{"name": "f"}]})


def test_split_by_order_prompts_and_critique(tools):
    bundle = TOOLS.build(TaskSpec(options={"role_mode": "split_by_order"}))
    assert "call number 2" in bundle.formatters[1](bundle.train_dataset[0])
    prompts = tools[0].external_transition(
        prompt=tools[1]["prompt"], agent_completions=["junk", js(OSLO)], num_agents=2
    )
    assert "not a JSON list" in prompts[0]
    with pytest.raises(ValueError, match="role_mode"):
        TOOLS.build(TaskSpec(options={"role_mode": "chaos"}))


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_reward_stays_in_range_on_junk(first, second):
    low, high = _JUNK.reward_func.reward_range
    value = _JUNK.reward_func([first], [second], batch_items=[_JUNK.train_dataset[0]])[0]
    assert low <= value <= high


_JUNK = TOOLS.build(TaskSpec())
