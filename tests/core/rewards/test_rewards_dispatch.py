"""Signature dispatch, keyword passing and return coercion of ``call_reward_function``."""

from __future__ import annotations

import functools
import gc
import inspect
import weakref
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from comlrl.core.rewards import (
    RewardError,
    call_reward_function,
    normalize_reward_lengths,
)
from comlrl.core.rewards import dispatch as dispatch_module

PROMPTS = ["p0", "p1"]
ITEMS = [{"id": 0}, {"id": 1}]


def completions(n: int) -> list[list[str]]:
    """Agent i's completions are ``a{i}_0``, ``a{i}_1``: easy to tell apart in assertions."""
    return [[f"a{i}_0", f"a{i}_1"] for i in range(n)]


class Recorder:
    """Keeps the arguments of the last call so tests can check the exact layout used."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple, dict]] = []

    def record(self, *args, **kwargs) -> list[float]:
        self.calls.append((args, kwargs))
        return [0.0, 0.0]


# --------------------------------------------------------------------------- N == 1


def test_n1_single_positional_gets_the_completions_only():
    seen = {}

    def reward(completions):
        seen["c"] = completions
        return [1.0, 2.0]

    out = call_reward_function(reward, completions(1), num_agents=1, prompts=PROMPTS)
    assert out == [1.0, 2.0]
    assert seen["c"] == ["a0_0", "a0_1"]


def test_n1_two_positionals_get_prompts_first():
    seen = {}

    def reward(p, c):
        seen.update(p=p, c=c)
        return [0.0, 0.0]

    call_reward_function(reward, completions(1), num_agents=1, prompts=PROMPTS, batch_items=ITEMS)
    assert seen == {"p": PROMPTS, "c": ["a0_0", "a0_1"]}


def test_n1_param_named_prompts_first_is_filled_by_name():
    seen = {}

    def reward(prompts, completions):
        seen.update(prompts=prompts, completions=completions)
        return [0.0, 0.0]

    call_reward_function(reward, completions(1), num_agents=1, prompts=PROMPTS)
    assert seen == {"prompts": PROMPTS, "completions": ["a0_0", "a0_1"]}


def test_n1_batch_items_default_parameter_receives_real_items():
    # B4, one-agent form: the reference counted batch_items as a slot and passed None.
    seen = {}

    def reward(c, batch_items=None):
        seen.update(c=c, batch_items=batch_items)
        return [0.0, 0.0]

    call_reward_function(reward, completions(1), num_agents=1, prompts=PROMPTS, batch_items=ITEMS)
    assert seen == {"c": ["a0_0", "a0_1"], "batch_items": ITEMS}


@pytest.mark.parametrize("n_positional", [0, 3])
def test_n1_other_counts_are_rejected(n_positional):
    names = ", ".join(f"x{i}" for i in range(n_positional))
    namespace: dict = {}
    exec(f"def odd_reward({names}):\n    return [0.0]", namespace)
    with pytest.raises(ValueError, match="odd_reward") as info:
        call_reward_function(namespace["odd_reward"], completions(1), num_agents=1)
    assert "accepted reward signatures" in str(info.value)
    assert f"{n_positional} positional" in str(info.value)


# --------------------------------------------------------------------------- N == 2


def test_n2_one_positional_per_agent():
    seen = {}

    def reward(c1, c2):
        seen.update(c1=c1, c2=c2)
        return [1, 2]

    assert call_reward_function(reward, completions(2), num_agents=2) == [1.0, 2.0]
    assert seen == {"c1": ["a0_0", "a0_1"], "c2": ["a1_0", "a1_1"]}


def test_n2_prompts_first():
    seen = {}

    def reward(p, c1, c2):
        seen.update(p=p, c1=c1, c2=c2)
        return [0, 0]

    call_reward_function(reward, completions(2), num_agents=2, prompts=PROMPTS)
    assert seen == {"p": PROMPTS, "c1": ["a0_0", "a0_1"], "c2": ["a1_0", "a1_1"]}


def test_n2_single_parameter_gets_list_of_lists():
    seen = {}

    def reward(all_completions):
        seen["all"] = all_completions
        return [0, 0]

    call_reward_function(reward, completions(2), num_agents=2)
    assert seen["all"] == completions(2)


def test_b4_batch_items_default_parameter_with_two_agents():
    seen = {}

    def reward(c1, c2, batch_items=None):
        seen.update(c1=c1, c2=c2, batch_items=batch_items)
        return [0.0, 0.0]

    call_reward_function(reward, completions(2), num_agents=2, prompts=PROMPTS, batch_items=ITEMS)
    assert seen["batch_items"] is ITEMS
    assert seen["c1"] == ["a0_0", "a0_1"]
    assert seen["c2"] == ["a1_0", "a1_1"]


def test_n2_batch_items_and_prompts_before_the_data_parameters():
    seen = {}

    def reward(batch_items, prompts, c1, c2):
        seen.update(batch_items=batch_items, prompts=prompts, c1=c1, c2=c2)
        return [0, 0]

    call_reward_function(reward, completions(2), num_agents=2, prompts=PROMPTS, batch_items=ITEMS)
    assert seen == {
        "batch_items": ITEMS,
        "prompts": PROMPTS,
        "c1": ["a0_0", "a0_1"],
        "c2": ["a1_0", "a1_1"],
    }


def test_keyword_only_prompts_and_batch_items():
    seen = {}

    def reward(c1, c2, *, batch_items=None, prompts=None):
        seen.update(batch_items=batch_items, prompts=prompts)
        return [0, 0]

    call_reward_function(reward, completions(2), num_agents=2, prompts=PROMPTS, batch_items=ITEMS)
    assert seen == {"batch_items": ITEMS, "prompts": PROMPTS}


def test_only_batch_items_named_means_no_prompts_keyword():
    rec = Recorder()

    def reward(c1, c2, batch_items=None):
        return rec.record(c1, c2, batch_items=batch_items)

    call_reward_function(reward, completions(2), num_agents=2, prompts=PROMPTS, batch_items=ITEMS)
    # A signature without prompts/**kwargs would raise TypeError if prompts were passed;
    # reaching here with the right batch_items proves the layout.
    assert rec.calls[0][1] == {"batch_items": ITEMS}


def test_var_keyword_receives_prompts_and_batch_items():
    seen = {}

    def reward(c1, c2, **kwargs):
        seen.update(kwargs)
        return [0, 0]

    call_reward_function(reward, completions(2), num_agents=2, prompts=PROMPTS, batch_items=ITEMS)
    assert seen == {"prompts": PROMPTS, "batch_items": ITEMS}


def test_var_keyword_is_not_given_values_that_were_not_supplied():
    seen = {}

    def reward(c1, c2, **kwargs):
        seen.update(kwargs)
        return [0, 0]

    call_reward_function(reward, completions(2), num_agents=2)
    assert seen == {}


def test_named_batch_items_gets_none_when_not_supplied():
    seen = {}

    def reward(c1, c2, *, batch_items="sentinel"):
        seen["batch_items"] = batch_items
        return [0, 0]

    call_reward_function(reward, completions(2), num_agents=2)
    assert seen["batch_items"] is None


def test_prompts_first_layout_does_not_repeat_prompts_as_keyword():
    seen = {}

    def reward(p, c1, c2, **kwargs):
        seen.update(p=p, kwargs=kwargs)
        return [0, 0]

    call_reward_function(reward, completions(2), num_agents=2, prompts=PROMPTS, batch_items=ITEMS)
    assert seen["p"] == PROMPTS
    assert seen["kwargs"] == {"batch_items": ITEMS}


def test_var_positional_gets_one_list_per_agent_and_keywords():
    seen = {}

    def reward(*agent_lists, batch_items=None, prompts=None):
        seen.update(lists=agent_lists, batch_items=batch_items, prompts=prompts)
        return [0, 0]

    call_reward_function(reward, completions(2), num_agents=2, prompts=PROMPTS, batch_items=ITEMS)
    assert seen["lists"] == tuple(completions(2))
    assert seen["batch_items"] == ITEMS
    assert seen["prompts"] == PROMPTS


def test_var_positional_after_a_named_data_parameter():
    seen = {}

    def reward(first, *rest):
        seen.update(first=first, rest=rest)
        return [0, 0]

    call_reward_function(reward, completions(3), num_agents=3, prompts=PROMPTS)
    assert seen["first"] == completions(3)[0]
    assert seen["rest"] == tuple(completions(3)[1:])


def test_positional_only_parameters():
    seen = {}

    def reward(c1, c2, /, batch_items=None):
        seen.update(c1=c1, c2=c2, batch_items=batch_items)
        return [0, 0]

    call_reward_function(reward, completions(2), num_agents=2, batch_items=ITEMS)
    assert seen == {"c1": ["a0_0", "a0_1"], "c2": ["a1_0", "a1_1"], "batch_items": ITEMS}


# --------------------------------------------------------------------------- N == 3


def test_n3_one_positional_per_agent():
    seen = {}

    def reward(a, b, c):
        seen.update(a=a, b=b, c=c)
        return [0, 0]

    call_reward_function(reward, completions(3), num_agents=3)
    assert [seen["a"], seen["b"], seen["c"]] == completions(3)


def test_n3_prompts_first():
    seen = {}

    def reward(p, a, b, c, batch_items=None):
        seen.update(p=p, rest=[a, b, c], batch_items=batch_items)
        return [0, 0]

    call_reward_function(reward, completions(3), num_agents=3, prompts=PROMPTS, batch_items=ITEMS)
    assert seen == {"p": PROMPTS, "rest": completions(3), "batch_items": ITEMS}


def test_n3_single_parameter_gets_list_of_lists():
    seen = {}

    def reward(everything, prompts=None):
        seen.update(everything=everything, prompts=prompts)
        return [0, 0]

    call_reward_function(reward, completions(3), num_agents=3, prompts=PROMPTS)
    assert seen == {"everything": completions(3), "prompts": PROMPTS}


@pytest.mark.parametrize("n_positional", [0, 2, 5])
def test_n3_other_counts_are_rejected(n_positional):
    names = ", ".join(f"x{i}" for i in range(n_positional))
    namespace: dict = {}
    exec(f"def three_agent_reward({names}):\n    return [0.0]", namespace)
    with pytest.raises(ValueError, match="three_agent_reward") as info:
        call_reward_function(namespace["three_agent_reward"], completions(3), num_agents=3)
    assert "num_agents=3" in str(info.value)


def test_other_counts_are_never_called():
    calls = []

    def reward(a, b):
        calls.append(1)
        return [0.0]

    with pytest.raises(ValueError):
        call_reward_function(reward, completions(3), num_agents=3)
    assert calls == []


# --------------------------------------------------------------------------- callables


def test_callable_instance_and_bound_method():
    class Scorer:
        def __call__(self, c1, c2, batch_items=None):
            return [float(len(batch_items))] * 2

        def score(self, c1, c2, prompts=None):
            return [float(len(prompts))] * 2

    scorer = Scorer()
    assert call_reward_function(scorer, completions(2), num_agents=2, batch_items=ITEMS) == [2, 2]
    out = call_reward_function(scorer.score, completions(2), num_agents=2, prompts=["x"] * 3)
    assert out == [3.0, 3.0]


def test_partial_counts_only_unbound_parameters():
    def reward(weight, c1, c2, batch_items=None):
        return [weight * len(batch_items)] * 2

    bound = functools.partial(reward, 0.5)
    assert call_reward_function(bound, completions(2), num_agents=2, batch_items=ITEMS) == [
        1.0,
        1.0,
    ]


def test_unreadable_signature_is_called_with_the_lists_only():
    with pytest.raises(ValueError):
        inspect.signature(max)  # precondition: a builtin without a signature
    assert call_reward_function(max, [[1.0, 3.0]], num_agents=1, prompts=["x"]) == [3.0]


def test_required_keyword_only_parameter_is_rejected_before_calling():
    def reward(c1, c2, *, temperature):
        raise AssertionError("must not be called")

    with pytest.raises(ValueError, match="temperature"):
        call_reward_function(reward, completions(2), num_agents=2)


def test_wrong_number_of_agent_lists_is_a_value_error():
    with pytest.raises(ValueError, match="num_agents=2"):
        call_reward_function(lambda a, b: [0], completions(3), num_agents=2)


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2"])
def test_num_agents_must_be_positive_int(bad):
    with pytest.raises(ValueError, match="num_agents"):
        call_reward_function(lambda a: [0], completions(1), num_agents=bad)


# --------------------------------------------------------------------------- errors propagate


def test_type_error_inside_reward_is_not_retried():
    error = TypeError("unsupported operand inside the reward")
    calls = []

    def reward(c1, c2, batch_items=None):
        calls.append((c1, c2, batch_items))
        raise error

    with pytest.raises(TypeError) as info:
        call_reward_function(
            reward, completions(2), num_agents=2, prompts=PROMPTS, batch_items=ITEMS
        )
    assert info.value is error
    assert len(calls) == 1
    assert calls[0][2] is ITEMS


@pytest.mark.parametrize("exc_type", [KeyError, ValueError, RuntimeError, ZeroDivisionError])
def test_other_exceptions_propagate_unchanged(exc_type):
    error = exc_type("from user code")
    calls = []

    def reward(c):
        calls.append(c)
        raise error

    with pytest.raises(exc_type) as info:
        call_reward_function(reward, completions(1), num_agents=1)
    assert info.value is error
    assert len(calls) == 1


# --------------------------------------------------------------------------- coercion


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (torch.tensor([0.5, 1.5]), [0.5, 1.5]),
        (torch.tensor(2.0), [2.0]),
        (torch.tensor([1.0, 2.0], requires_grad=True).detach(), [1.0, 2.0]),
        (np.array([1, 2], dtype=np.int64), [1.0, 2.0]),
        (np.float32(0.25), [0.25]),
        ((1, 2.5), [1.0, 2.5]),
        ([True, 0], [1.0, 0.0]),
        (3, [3.0]),
        (0.75, [0.75]),
        (Fraction(1, 4), [0.25]),
        ([], []),
    ],
)
def test_return_coercion(returned, expected):
    out = call_reward_function(lambda c: returned, completions(1), num_agents=1)
    assert out == expected
    assert all(type(v) is float for v in out)


def test_coercion_does_not_need_a_detached_tensor():
    values = torch.tensor([1.0, 2.0], requires_grad=True) * 2
    assert call_reward_function(lambda c: values, completions(1), num_agents=1) == [2.0, 4.0]


@pytest.mark.parametrize("returned", [None, [1.0, None], "0.5", ["1.0"], [[1.0, 2.0]], object()])
def test_non_numeric_results_raise_reward_error_naming_the_function(returned):
    def my_special_reward(c):
        return returned

    with pytest.raises(RewardError, match="my_special_reward"):
        call_reward_function(my_special_reward, completions(1), num_agents=1)


def test_reward_error_is_a_value_error():
    assert issubclass(RewardError, ValueError)


# --------------------------------------------------------------------------- caching


def test_signature_is_read_once_per_function(monkeypatch):
    real = inspect.signature
    reads = []

    def counting(obj, *args, **kwargs):
        reads.append(obj)
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(dispatch_module.inspect, "signature", counting)

    def reward(c1, c2):
        return [0, 0]

    for _ in range(5):
        call_reward_function(reward, completions(2), num_agents=2)
    assert reads.count(reward) == 1


def test_cache_does_not_keep_the_function_alive():
    def reward(c):
        return [0.0]

    call_reward_function(reward, completions(1), num_agents=1)
    ref = weakref.ref(reward)
    del reward
    gc.collect()
    assert ref() is None


def test_unhashable_callable_still_works():
    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, c1, c2):
            return [1.0, 2.0]

    assert call_reward_function(Unhashable(), completions(2), num_agents=2) == [1.0, 2.0]


# --------------------------------------------------------------------------- hypothesis


@given(
    n=st.integers(min_value=1, max_value=4),
    m=st.integers(min_value=0, max_value=4),
    with_batch_items=st.booleans(),
)
def test_per_agent_layout_hands_over_exactly_the_inputs(n, m, with_batch_items):
    agent_lists = [[f"{i}:{j}" for j in range(m)] for i in range(n)]
    items = [{"j": j} for j in range(m)] if with_batch_items else None
    seen = {}

    def reward(*lists, batch_items=None):
        seen.update(lists=list(lists), batch_items=batch_items)
        return [float(j) for j in range(m)]

    out = call_reward_function(reward, agent_lists, num_agents=n, batch_items=items)
    assert out == [float(j) for j in range(m)]
    assert seen["lists"] == agent_lists
    assert seen["batch_items"] == items


# --------------------------------------------------------------------------- normalize lengths


def test_normalize_reward_lengths_broadcasts_a_single_value():
    assert normalize_reward_lengths([0.5], num_agents=2, num_generations=3) == [0.5, 0.5, 0.5]


def test_normalize_reward_lengths_keeps_n_values_as_new_list():
    rewards = [1.0, 2.0, 3.0]
    out = normalize_reward_lengths(rewards, num_agents=2, num_generations=3)
    assert out == rewards
    assert out is not rewards


@pytest.mark.parametrize("length", [0, 2, 4])
def test_normalize_reward_lengths_rejects_other_lengths(length):
    with pytest.raises(ValueError, match="either 1 or N values per prompt") as info:
        normalize_reward_lengths([0.0] * length, num_agents=2, num_generations=3)
    assert f"got {length} values" in str(info.value)
    assert "num_generations = 3" in str(info.value)


@pytest.mark.parametrize("bad", [0, -2, True, 1.5])
def test_normalize_reward_lengths_validates_num_generations(bad):
    with pytest.raises(ValueError, match="num_generations"):
        normalize_reward_lengths([1.0], num_agents=1, num_generations=bad)
