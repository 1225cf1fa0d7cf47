"""Per-agent rewards in the core: the shapes a reward may return, the errors for the others, and
per-agent returns in rollout trees."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from comlrl.core.rewards import RewardCaller, RewardError, RewardProcessors, RewardScores
from comlrl.core.rollout.generation import PromptSamples
from comlrl.core.rollout.tree import TreeSettings, agent_returns, build_trees


def batch(m: int, n: int = 2):
    comps = [[f"a{i}_{j}" for j in range(m)] for i in range(n)]
    return comps, [f"p{j}" for j in range(m)], [{"j": j} for j in range(m)]


def run(caller: RewardCaller, m: int, n: int = 2) -> RewardScores:
    comps, prompts, items = batch(m, n)
    return caller.score(comps, prompts=prompts, batch_items=items)


# --------------------------------------------------------------------------- accepted shapes


@pytest.mark.parametrize(
    "make",
    [
        lambda items: [[it["j"], -it["j"]] for it in items],
        lambda items: [(it["j"], -it["j"]) for it in items],
        lambda items: torch.tensor([[it["j"], -it["j"]] for it in items], dtype=torch.float32),
        lambda items: np.array([[it["j"], -it["j"]] for it in items]),
        lambda items: [torch.tensor([it["j"], -it["j"]]) for it in items],
    ],
    ids=["lists", "tuples", "tensor", "array", "list-of-tensors"],
)
@pytest.mark.parametrize("mode", ["batch", "auto"])
def test_batch_rows_give_each_agent_its_value(make, mode):
    def rows(c1, c2, batch_items=None):
        return make(batch_items)

    caller = RewardCaller(rows, num_agents=2, call_mode=mode)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = run(caller, 3)
    assert scores.per_agent
    assert scores.agent(0) == [0.0, 1.0, 2.0]
    assert scores.agent(1) == [0.0, -1.0, -2.0]
    assert scores.shared == [0.0, 0.0, 0.0]
    assert caller.num_calls == 1
    assert caller(*batch(3)[:1], prompts=batch(3)[1], batch_items=batch(3)[2]) == [
        [0.0, 0.0],
        [1.0, -1.0],
        [2.0, -2.0],
    ]


def test_shared_values_stay_shared():
    def shared(c1, c2, batch_items=None):
        return [float(it["j"]) for it in batch_items]

    scores = run(RewardCaller(shared, num_agents=2), 3)
    assert not scores.per_agent
    assert scores.rows == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    assert scores.shared == [0.0, 1.0, 2.0]


def test_per_sample_vectors_are_per_agent():
    def vector(c1, c2, batch_items=None):
        return [10.0 + batch_items[0]["j"], 0.0]

    caller = RewardCaller(vector, num_agents=2, call_mode="per_sample")
    scores = run(caller, 3)
    assert scores.per_agent
    assert scores.agent(0) == [10.0, 11.0, 12.0]
    assert scores.agent(1) == [0.0, 0.0, 0.0]
    assert caller.num_calls == 3


def test_per_sample_may_mix_shared_and_per_agent_values():
    def mixed(c1, c2, batch_items=None):
        return 5.0 if batch_items[0]["j"] == 0 else [[1.0, 3.0]]

    scores = run(RewardCaller(mixed, num_agents=2, call_mode="per_sample"), 2)
    assert scores.rows == [[5.0, 5.0], [1.0, 3.0]]
    assert scores.per_agent


def test_a_single_joint_action_may_return_its_vector_flat():
    def vector(c1, c2, c3):
        return [1.0, 2.0, 3.0]

    scores = run(RewardCaller(vector, num_agents=3), 1, n=3)
    assert scores.rows == [[1.0, 2.0, 3.0]]
    assert scores.per_agent


def test_auto_reads_a_reference_style_per_agent_list_per_joint_action():
    """CoMLRL 1.4.3 actor-critic style: one value per agent for the call's joint action."""

    def per_agent(completions_0, completions_1):
        return [float(len(completions_0[0])), -1.0]

    caller = RewardCaller(per_agent, num_agents=2)
    with pytest.warns(UserWarning, match=r"2 values \(one per agent\) for 4 joint actions"):
        scores = run(caller, 4)
    assert caller.call_mode == "per_sample"
    assert scores.agent(0) == [4.0] * 4
    assert scores.agent(1) == [-1.0] * 4
    assert caller.num_calls == 5  # the batch attempt, then one call per joint action


def test_auto_tie_is_settled_as_shared_values_by_one_probe():
    calls = []

    def shared(c1, c2, batch_items=None):
        calls.append(len(c1))
        return [float(it["j"]) for it in batch_items]

    caller = RewardCaller(shared, num_agents=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = run(caller, 2)
    assert scores.rows == [[0.0, 0.0], [1.0, 1.0]]
    assert not scores.per_agent
    assert calls == [2, 1]
    assert caller.call_mode == "batch"
    run(caller, 2)
    assert calls == [2, 1, 2]  # settled: no second probe


def test_auto_tie_is_settled_as_per_agent_values_by_one_probe():
    calls = []

    def per_agent(c1, c2, batch_items=None):
        calls.append(len(c1))
        return [1.0, float(batch_items[0]["j"])]

    caller = RewardCaller(per_agent, num_agents=2)
    with pytest.warns(UserWarning, match="once per joint action"):
        scores = run(caller, 2)
    assert scores.rows == [[1.0, 0.0], [1.0, 1.0]]
    assert calls == [2, 1, 1]  # batch, probe (reused for joint action 0), joint action 1
    assert caller.call_mode == "per_sample"


# --------------------------------------------------------------------------- rejected shapes


def test_auto_tie_that_the_probe_cannot_settle_is_an_error():
    def unsettled(c1, c2):
        return [1.0, 2.0] if len(c1) == 2 else [1.0, 2.0, 3.0]

    caller = RewardCaller(unsettled, num_agents=2)
    with pytest.raises(RewardError, match="unsettled") as info:
        run(caller, 2)
    message = str(info.value)
    assert "returned 2 values for 2 joint actions of 2 agents" in message
    assert "a flat list of 3 values" in message
    assert "2 rows of 2 numbers" in message
    assert "reward_call_mode" in message


def test_trl_style_list_per_agent_is_rejected_with_the_hint():
    def trl_style(completions):
        return [float(len(c)) for c in completions]

    caller = RewardCaller(trl_style, num_agents=2)
    with pytest.raises(RewardError, match="trl_style") as info:
        run(caller, 3)
    assert "zip(*completions)" in str(info.value)
    assert "one row of 2 values per joint action" in str(info.value)
    caller = RewardCaller(trl_style, num_agents=2)
    with pytest.raises(RewardError, match="zip"):
        run(caller, 2)  # the tie, settled by the probe, is the same mistake


@pytest.mark.parametrize(
    ("result", "fragment"),
    [
        ([[1.0, 2.0], [3.0, 4.0]], "2 rows of 2 values for 3 joint actions"),
        ([[1.0, 2.0, 0.0]] * 3, "3 rows of 3 values for 3 joint actions"),
        ([[1.0], [2.0], [3.0]], "3 rows of 1 values"),
        ([[1.0, 2.0], [3.0], [4.0, 5.0]], "rows of lengths [1, 2]"),
        ([1.0, [2.0, 3.0], 4.0], "mix of numbers and lists"),
        ([[[1.0, 2.0]], [[1.0, 2.0]], [[1.0, 2.0]]], "nested too deeply"),
        (torch.zeros(3, 2, 1), "nested too deeply"),
        ([1.0, 2.0], "returned 2 values for 3 joint actions"),
    ],
)
def test_batch_mode_rejects_wrong_shapes_naming_what_is_valid(result, fragment):
    def shaped(c1, c2):
        return result

    caller = RewardCaller(shaped, num_agents=2, call_mode="batch")
    with pytest.raises(RewardError, match="shaped") as info:
        run(caller, 3)
    message = str(info.value)
    assert fragment in message
    if "nested" not in fragment and "mix" not in fragment:
        assert "3 numbers (one shared value per joint action)" in message
        assert "3 rows of 2 numbers" in message


@pytest.mark.parametrize("result", [[1.0, 2.0, 3.0], [[1.0, 2.0, 3.0]], [[1.0], [2.0]], []])
def test_per_sample_mode_rejects_wrong_lengths(result):
    def shaped(c1, c2):
        return result

    caller = RewardCaller(shaped, num_agents=2, call_mode="per_sample")
    with pytest.raises(RewardError, match="shaped") as info:
        run(caller, 2)
    message = str(info.value)
    assert "joint action 0" in message
    assert "2 numbers (one per agent)" in message


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_per_agent_values_name_action_and_agent(bad):
    def poisoned(c1, c2):
        return [[1.0, 1.0], [1.0, bad], [0.0, 0.0]]

    caller = RewardCaller(poisoned, num_agents=2, call_mode="batch")
    with pytest.raises(RewardError, match="poisoned.*per-agent") as info:
        run(caller, 3)
    assert "[1][1]=" in str(info.value)


def test_processor_applies_to_every_agent_value():
    def rows(c1, c2):
        return [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]

    caller = RewardCaller(rows, num_agents=2, reward_processor=RewardProcessors.scale(10.0))
    assert run(caller, 3).rows == [[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]]

    caller = RewardCaller(rows, num_agents=2, reward_processor=lambda x: x / 0.0 if x > 5 else x)
    with pytest.raises(ZeroDivisionError):
        run(caller, 3)


# --------------------------------------------------------------------------- trees


def _samples(prompts_per_agent, k):
    return [
        [
            PromptSamples(p, [1], [[2, j] for j in range(k)], [f"a{i}s{j}" for j in range(k)])
            for p in prompts
        ]
        for i, prompts in enumerate(prompts_per_agent)
    ]


def _transition(**kwargs):
    return [f"{kwargs['prompt']}+" for _ in range(kwargs["num_agents"])]


def _trees(score_fn, *, n=2, k=2, turns=1, mode="aligned", discount=1.0):
    settings = TreeSettings(
        num_agents=n, num_turns=turns, num_samples=k, joint_mode=mode, discount=discount
    )
    return build_trees(
        [{"prompt": "p"}],
        settings,
        [lambda item, external_prompt=None: item["prompt"]] * n,
        lambda prompts: _samples(prompts, k),
        score_fn,
        _transition if turns > 1 else None,
    )


def _agent0_favoured(completions, *, prompts, batch_items):
    """Agent 0 gets 1 for its sample 1 and 0 otherwise; agent 1 always gets 0."""
    rows = [[1.0 if c.endswith("s1") else 0.0, 0.0] for c in completions[0]]
    return RewardScores(rows, per_agent=True)


def test_tree_keeps_shared_means_and_each_agents_own_returns():
    (root,) = _trees(_agent0_favoured)
    assert root.per_agent
    assert root.rewards == [0.0, 0.5]
    assert root.returns == [0.0, 0.5]
    assert agent_returns(root, 0) == [0.0, 1.0]
    assert agent_returns(root, 1) == [0.0, 0.0]


def test_multi_turn_returns_discount_each_agents_own_rewards():
    (root,) = _trees(_agent0_favoured, turns=2, discount=0.5)
    child = root.children[1]
    assert agent_returns(child, 0) == [0.0, 1.0]
    # joint action 1 at the root: own reward 1 + 0.5 * mean(child's own returns 0, 1)
    assert agent_returns(root, 0) == [0.0 + 0.5 * 0.5, 1.0 + 0.5 * 0.5]
    assert agent_returns(root, 1) == [0.0, 0.0]
    assert root.returns == [0.25 * 0.5, 0.5 + 0.5 * 0.25]


def test_cross_mode_averages_each_agents_own_returns():
    (root,) = _trees(_agent0_favoured, mode="cross")
    assert agent_returns(root, 0) == [0.0, 1.0]
    assert agent_returns(root, 1) == [0.0, 0.0]


def test_shared_rewards_give_every_agent_the_joint_return():
    def shared(completions, *, prompts, batch_items):
        return [float(j) for j in range(len(prompts))]

    (root,) = _trees(shared, turns=2, discount=0.9)
    assert not root.per_agent
    for agent in range(2):
        assert agent_returns(root, agent) == root.returns
