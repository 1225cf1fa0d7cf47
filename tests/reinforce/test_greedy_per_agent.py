"""MAReMax's greedy baseline with per-agent rewards: one baseline per agent, each the agent's
own reward for the greedy joint response (the audit's c6 stub crashed with `float(list)`)."""

import contextlib
import types

import pytest

from comlrl.core.rollout.generation import SamplingParams
from comlrl.reinforce.greedy import greedy_baselines


class _StubRollouts:
    """The rollouts surface greedy_baselines reads, scoring every joint action ``rewards``."""

    def __init__(self, rewards):
        self.rewards = rewards

    def sampling_params(self, kw):
        return SamplingParams()

    def generate_per_agent(self, prompts, n, params):
        return [[types.SimpleNamespace(texts=["x"]) for _ in p] for p in prompts]

    def score(self, completions, prompts, batch_items):
        return [self.rewards for _ in prompts]


class _Stub:
    """The trainer surface greedy_baselines reads."""

    num_agents = 2
    generation_kwargs: dict = {}

    def __init__(self, rewards):
        self.rollouts = _StubRollouts(rewards)
        self.timing = types.SimpleNamespace(phase=lambda name: contextlib.nullcontext())


NODE = types.SimpleNamespace(prompts=["a", "b"], raw_prompts=["a"], item={})


def test_per_agent_rewards_give_one_baseline_per_agent():
    assert greedy_baselines(_Stub([1.0, -1.0]), [NODE, NODE]) == [[1.0, -1.0], [1.0, -1.0]]


def test_a_shared_reward_is_every_agents_baseline():
    assert greedy_baselines(_Stub(0.5), [NODE]) == [[0.5, 0.5]]


def test_a_reward_row_of_the_wrong_width_is_named():
    with pytest.raises(ValueError, match="3 values for 2 agents"):
        greedy_baselines(_Stub([1.0, 2.0, 3.0]), [NODE])
