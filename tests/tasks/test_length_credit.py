"""The length-credit task: only the named agent's answer counts on each prompt."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from comlrl.core.task import TaskSpec
from comlrl.tasks.length_credit import (
    TASK,
    answer_score,
    dataset,
    deciding_agent_feedback,
    length_credit_reward,
)


def test_it_is_registered_and_builds_offline():
    eps = {ep.name: ep for ep in entry_points(group="comlrl.tasks")}
    assert eps["length_credit"].load() is TASK
    bundle = TASK.build(TaskSpec(num_agents=2))
    assert len(bundle.train_dataset) == 16 and len(bundle.eval_dataset) == 4
    assert bundle.reward_func.reward_range == (0.0, 1.0)
    # the decider alternates and the prompt names it
    for i, row in enumerate(bundle.train_dataset):
        assert row["decider"] == i % 2
        assert f"Agent {i % 2}'s answer counts." in bundle.formatters[0](row)


def test_only_the_deciding_agents_answer_is_read():
    rows = dataset(2)
    short, long = "a" * 20, "b" * 200
    # item 0: agent 0 decides; item 1: agent 1 decides
    assert length_credit_reward([short, short], [long, long], rows) == [0.25, 1.0]
    assert length_credit_reward([long, long], [short, short], rows) == [1.0, 0.25]
    assert length_credit_reward([short, "c" * 5], [long, "x" * 40], rows) == [0.25, 0.5]
    assert answer_score("") == 0.0


def test_a_row_without_a_decider_is_an_error():
    with pytest.raises(ValueError, match="'decider' 0 or 1"):
        length_credit_reward(["a"], ["b"], [{"prompt": "p"}])


def test_bad_settings_name_the_field():
    with pytest.raises(ValueError, match="num_agents must be 2"):
        TASK.build(TaskSpec(num_agents=3))
    with pytest.raises(ValueError, match="task.options"):
        TASK.build(TaskSpec(num_agents=2, options={"target": 5}))


def test_the_transition_keeps_the_prompt_that_names_the_decider():
    prompt = dataset(2)[1]["prompt"]
    out = deciding_agent_feedback(prompt=prompt, agent_completions=["ab", "abcd"], num_agents=2)
    assert out[0].startswith(prompt) and "2 characters" in out[0]
    assert "4 characters" in out[1]
