"""RewardCaller: call modes, auto switching, validation of counts and finiteness, processors."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from comlrl.core.rewards import RewardCaller, RewardError, RewardProcessors, set_reward_range

finite = st.floats(allow_nan=False, allow_infinity=False)


def batch(m: int, n: int = 2) -> tuple[list[list[str]], list[str], list[dict]]:
    agent_completions = [[f"a{i}_{j}" for j in range(m)] for i in range(n)]
    prompts = [f"p{j}" for j in range(m)]
    items = [{"j": j} for j in range(m)]
    return agent_completions, prompts, items


def score(caller: RewardCaller, m: int, n: int = 2) -> list[float]:
    comps, prompts, items = batch(m, n)
    return caller(comps, prompts=prompts, batch_items=items)


class BatchReward:
    """Scores every joint action of a batch: reward j = j + 0.5."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, c1, c2, *, prompts=None, batch_items=None):
        self.calls.append({"c1": c1, "c2": c2, "prompts": prompts, "batch_items": batch_items})
        return [item["j"] + 0.5 for item in batch_items]


class ScalarReward:
    """Written for one joint action per call: always returns a single number."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, c1, c2, batch_items=None):
        self.calls.append({"c1": c1, "c2": c2, "batch_items": batch_items})
        return float(batch_items[0]["j"]) * 10.0


# --------------------------------------------------------------------------- construction


def test_attributes():
    reward = BatchReward()
    caller = RewardCaller(reward, num_agents=2)
    assert caller.reward_func is reward
    assert caller.call_mode == "auto"
    assert caller.num_calls == 0
    assert caller.reward_range is None
    assert "BatchReward" in repr(caller)


def test_reward_range_is_read_from_the_function():
    def ranged(c1, c2):
        return [0.0] * len(c1)

    set_reward_range(ranged, 0.0, 2.0)
    assert RewardCaller(ranged, num_agents=2).reward_range == (0.0, 2.0)


def test_invalid_reward_range_is_reported_at_construction():
    def ranged(c1, c2):
        return [0.0]

    ranged.reward_range = (1.0, 0.0)
    with pytest.raises(ValueError, match="reward_range"):
        RewardCaller(ranged, num_agents=2)


def test_reward_func_must_be_callable():
    with pytest.raises(ValueError, match="reward_func must be a callable"):
        RewardCaller("not a function", num_agents=2)


@pytest.mark.parametrize("mode", ["Batch", "per-sample", "", None, 1])
def test_call_mode_is_validated(mode):
    with pytest.raises(ValueError, match="call_mode"):
        RewardCaller(BatchReward(), num_agents=2, call_mode=mode)


def test_reward_processor_must_be_callable():
    with pytest.raises(ValueError, match="reward_processor"):
        RewardCaller(BatchReward(), num_agents=2, reward_processor=2.0)


def test_bad_signature_fails_at_construction():
    def three_params(a, b, c, d):
        return [0.0]

    with pytest.raises(ValueError, match="three_params"):
        RewardCaller(three_params, num_agents=2)


def test_num_agents_is_validated():
    with pytest.raises(ValueError, match="num_agents"):
        RewardCaller(BatchReward(), num_agents=0)


# --------------------------------------------------------------------------- batch shape


def test_batch_shape_mismatches_are_value_errors():
    caller = RewardCaller(BatchReward(), num_agents=2)
    comps, prompts, items = batch(3)
    with pytest.raises(ValueError, match="num_agents=2"):
        caller(comps + [comps[0]], prompts=prompts, batch_items=items)
    with pytest.raises(ValueError, match="same number of completions"):
        caller([comps[0], comps[1][:2]], prompts=prompts, batch_items=items)
    with pytest.raises(ValueError, match="prompts"):
        caller(comps, prompts=prompts[:2], batch_items=items)
    with pytest.raises(ValueError, match="batch_items"):
        caller(comps, prompts=prompts, batch_items=items + items)
    assert caller.num_calls == 0


def test_empty_batch_does_not_call_the_function():
    reward = BatchReward()
    caller = RewardCaller(reward, num_agents=2)
    assert caller([[], []], prompts=[], batch_items=[]) == []
    assert caller.num_calls == 0
    assert reward.calls == []


# --------------------------------------------------------------------------- batch mode


def test_batch_mode_is_one_call_with_everything():
    reward = BatchReward()
    caller = RewardCaller(reward, num_agents=2, call_mode="batch")
    comps, prompts, items = batch(3)
    assert caller(comps, prompts=prompts, batch_items=items) == [0.5, 1.5, 2.5]
    assert caller.num_calls == 1
    assert reward.calls == [
        {"c1": comps[0], "c2": comps[1], "prompts": prompts, "batch_items": items}
    ]


def test_batch_mode_rejects_a_single_value_for_many():
    def lone_value(c1, c2):
        return 1.0

    caller = RewardCaller(lone_value, num_agents=2, call_mode="batch")
    with pytest.raises(RewardError, match="lone_value") as info:
        score(caller, 3)
    assert "returned 1 values for 3 joint actions" in str(info.value)
    assert caller.call_mode == "batch"


def test_batch_mode_rejects_too_many_values():
    def chatty_reward(c1, c2):
        return [0.1, 0.2, 0.3, 0.4]

    caller = RewardCaller(chatty_reward, num_agents=2, call_mode="batch")
    with pytest.raises(RewardError, match="chatty_reward") as info:
        score(caller, 3)
    message = str(info.value)
    assert "returned 4 values for 3 joint actions" in message
    assert "[0.1, 0.2, 0.3, 0.4]" in message


def test_batch_mode_rejects_an_empty_result():
    def empty_reward(c1, c2):
        return []

    caller = RewardCaller(empty_reward, num_agents=2, call_mode="batch")
    with pytest.raises(RewardError, match="empty_reward.*no values"):
        score(caller, 2)


def test_tensor_results_are_accepted():
    def tensor_reward(c1, c2):
        return torch.arange(len(c1), dtype=torch.float32)

    caller = RewardCaller(tensor_reward, num_agents=2, call_mode="batch")
    assert score(caller, 3) == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("mode", ["batch", "auto", "per_sample"])
def test_user_type_error_propagates_unchanged_and_is_not_retried(mode):
    error = TypeError("bad operand in the user's reward")
    calls = []

    def broken_reward(c1, c2, batch_items=None):
        calls.append(batch_items)
        raise error

    caller = RewardCaller(broken_reward, num_agents=2, call_mode=mode)
    with pytest.raises(TypeError) as info:
        score(caller, 3)
    assert info.value is error
    assert len(calls) == 1
    assert caller.num_calls == 1


# --------------------------------------------------------------------------- per-sample mode


def test_per_sample_mode_calls_once_per_joint_action_with_one_element_lists():
    reward = ScalarReward()
    caller = RewardCaller(reward, num_agents=2, call_mode="per_sample")
    comps, prompts, items = batch(3)
    assert caller(comps, prompts=prompts, batch_items=items) == [0.0, 10.0, 20.0]
    assert caller.num_calls == 3
    assert reward.calls == [
        {"c1": [comps[0][j]], "c2": [comps[1][j]], "batch_items": [items[j]]} for j in range(3)
    ]


def test_per_sample_mode_passes_one_prompt_per_call():
    seen = []

    def reward(prompts, c1, c2, c3):
        seen.append(prompts)
        return [1.0]

    caller = RewardCaller(reward, num_agents=3, call_mode="per_sample")
    score(caller, 2, n=3)
    assert seen == [["p0"], ["p1"]]


def test_per_sample_mode_rejects_extra_values_instead_of_keeping_the_first():
    def several_values(c):
        return [len(c[0]), 99.0, 7.0]

    caller = RewardCaller(several_values, num_agents=1, call_mode="per_sample")
    with pytest.raises(RewardError, match="several_values") as info:
        caller([["ab", "abcd"]], prompts=["p", "q"], batch_items=[0, 1])
    message = str(info.value)
    assert "returned 3 values for 1 joint action of 1 agent" in message
    assert "a single number" in message
    assert "joint action 0" in message


def test_per_sample_mode_rejects_an_empty_result_naming_the_joint_action():
    def sometimes_empty(c1, c2, batch_items=None):
        return [] if batch_items[0]["j"] == 1 else [1.0]

    caller = RewardCaller(sometimes_empty, num_agents=2, call_mode="per_sample")
    with pytest.raises(RewardError, match="sometimes_empty.*joint action 1"):
        score(caller, 3)


# --------------------------------------------------------------------------- auto mode


def test_auto_calls_a_batch_capable_function_once_per_batch():
    reward = BatchReward()
    caller = RewardCaller(reward, num_agents=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for expected_calls, m in enumerate([4, 2, 5], start=1):
            assert score(caller, m) == [j + 0.5 for j in range(m)]
            assert caller.num_calls == expected_calls
    assert len(reward.calls) == 3
    assert caller.call_mode == "batch"


def test_auto_switches_a_scalar_function_to_per_sample_once():
    reward = ScalarReward()
    caller = RewardCaller(reward, num_agents=2)
    with pytest.warns(UserWarning, match="ScalarReward") as record:
        assert score(caller, 3) == [0.0, 10.0, 20.0]
    assert len(record) == 1
    message = str(record[0].message)
    assert "one value for 3 joint actions" in message
    assert "once per joint action" in message
    assert "call_mode" in message
    assert caller.call_mode == "per_sample"
    # one batch probe plus three per-sample calls
    assert caller.num_calls == 4
    assert len(reward.calls) == 4
    assert reward.calls[0]["c1"] == batch(3)[0][0]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert score(caller, 2) == [0.0, 10.0]
    assert caller.num_calls == 6
    assert caller.call_mode == "per_sample"


def test_auto_stays_undecided_for_single_joint_actions():
    reward = ScalarReward()
    caller = RewardCaller(reward, num_agents=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert score(caller, 1) == [0.0]
    assert caller.call_mode == "auto"
    assert caller.num_calls == 1


def test_auto_rejects_other_count_mismatches():
    def three_values(c1, c2):
        return [1.0, 2.0, 3.0]

    caller = RewardCaller(three_values, num_agents=2)
    with pytest.raises(RewardError, match="three_values.*returned 3 values for 4") as info:
        score(caller, 4)
    assert "4 rows of 2 numbers" in str(info.value)
    assert caller.num_calls == 1


def test_auto_after_settling_on_batch_rejects_a_single_value():
    outputs = iter([[1.0, 2.0, 3.0], [3.0]])

    def flaky(c1, c2):
        return next(outputs)

    caller = RewardCaller(flaky, num_agents=2)
    assert score(caller, 3) == [1.0, 2.0, 3.0]
    assert caller.call_mode == "batch"
    with pytest.raises(RewardError, match="flaky"):
        score(caller, 3)


# --------------------------------------------------------------------------- finiteness


@pytest.mark.parametrize(
    ("bad", "shown"), [(math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf")]
)
@pytest.mark.parametrize("mode", ["batch", "auto", "per_sample"])
def test_non_finite_values_name_the_function_index_and_value(bad, shown, mode):
    def nonfinite_reward(c1, c2, batch_items=None):
        return [bad if item["j"] == 2 else 1.0 for item in batch_items]

    caller = RewardCaller(nonfinite_reward, num_agents=2, call_mode=mode)
    with pytest.raises(RewardError, match="nonfinite_reward") as info:
        score(caller, 4)
    message = str(info.value)
    assert "[2]" in message
    assert f"[2]={shown}" in message


def test_non_finite_tensor_values_are_rejected():
    def tensor_reward(c):
        return torch.tensor([0.0, float("nan")])

    caller = RewardCaller(tensor_reward, num_agents=1, call_mode="batch")
    with pytest.raises(RewardError, match="tensor_reward"):
        caller([["a", "b"]], prompts=["p", "q"], batch_items=[0, 1])


# --------------------------------------------------------------------------- processors


def test_processor_is_applied_to_each_value():
    caller = RewardCaller(
        BatchReward(),
        num_agents=2,
        reward_processor=RewardProcessors.compose(
            RewardProcessors.scale(2.0), RewardProcessors.shift(-1.0)
        ),
    )
    assert score(caller, 3) == [0.0, 2.0, 4.0]


def test_processor_sees_validated_raw_values():
    seen = []

    def spy(x):
        seen.append(x)
        return x

    def nan_reward(c1, c2):
        return [math.nan, 1.0]

    caller = RewardCaller(nan_reward, num_agents=2, reward_processor=spy)
    with pytest.raises(RewardError, match="nan_reward"):
        score(caller, 2)
    assert seen == []


def test_processor_producing_non_finite_values_is_named():
    def big_reward(c1, c2):
        return [1.0, 1e308]

    caller = RewardCaller(big_reward, num_agents=2, reward_processor=RewardProcessors.scale(10.0))
    with pytest.raises(RewardError, match=r"scale\(10.0\)") as info:
        score(caller, 2)
    assert "big_reward" in str(info.value)
    assert "[1]" in str(info.value)


def test_processor_returning_a_non_number_is_named():
    def to_text(x):
        return f"{x}!"

    caller = RewardCaller(BatchReward(), num_agents=2, reward_processor=to_text)
    with pytest.raises(RewardError, match="to_text"):
        score(caller, 2)


def test_processor_exceptions_propagate():
    error = ZeroDivisionError("processor bug")

    def crash(x):
        raise error

    caller = RewardCaller(BatchReward(), num_agents=2, reward_processor=crash)
    with pytest.raises(ZeroDivisionError) as info:
        score(caller, 2)
    assert info.value is error


# --------------------------------------------------------------------------- hypothesis


@given(values=st.lists(finite, min_size=1, max_size=16))
def test_finite_rewards_pass_through_unchanged_in_batch_mode(values):
    def fixed(c1, c2):
        return list(values)

    caller = RewardCaller(fixed, num_agents=2, call_mode="batch")
    out = score(caller, len(values))
    assert out == values
    assert caller.num_calls == 1


@given(
    data=st.data(),
    values=st.lists(finite, min_size=1, max_size=16),
    bad=st.sampled_from([math.nan, math.inf, -math.inf]),
)
def test_any_non_finite_value_raises(data, values, bad):
    position = data.draw(st.integers(min_value=0, max_value=len(values) - 1))
    values = list(values)
    values[position] = bad

    def poisoned(c1, c2):
        return values

    caller = RewardCaller(poisoned, num_agents=2, call_mode="batch")
    with pytest.raises(RewardError, match="poisoned") as info:
        score(caller, len(values))
    assert f"[{position}]=" in str(info.value)
