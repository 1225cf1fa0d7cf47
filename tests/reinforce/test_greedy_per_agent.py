"""MAReMax's greedy baseline with per-agent rewards: one baseline per agent, each the agent's
own reward for the greedy joint response (the audit's c6 stub crashed with `float(list)`)."""

import contextlib
import types

import pytest

from comlrl.core.rollout.generation import SamplingParams
from comlrl.reinforce.greedy import greedy_baselines


class _Stub:
    """The trainer surface greedy_baselines reads besides the rollouts."""

    num_agents = 2
    generation_kwargs: dict = {}

    def __init__(self, rewards):
        self.rewards = rewards
        self.timing = types.SimpleNamespace(phase=lambda name: contextlib.nullcontext())


@pytest.fixture(autouse=True)
def stub_rollouts(monkeypatch):
    """The rollouts greedy_baselines calls: one completion per prompt, every joint action
    scored the stub trainer's ``rewards``."""
    from comlrl.core.rollout import rollouts

    monkeypatch.setattr(rollouts, "sampling_params", lambda t, kw: SamplingParams())
    monkeypatch.setattr(
        rollouts,
        "generate_per_agent",
        lambda t, prompts, n, params: [
            [types.SimpleNamespace(texts=["x"]) for _ in p] for p in prompts
        ],
    )
    monkeypatch.setattr(
        rollouts,
        "score",
        lambda t, completions, prompts, batch_items: [t.rewards for _ in prompts],
    )


NODE = types.SimpleNamespace(prompts=["a", "b"], raw_prompts=["a"], item={})


def test_per_agent_rewards_give_one_baseline_per_agent():
    assert greedy_baselines(_Stub([1.0, -1.0]), [NODE, NODE]) == [[1.0, -1.0], [1.0, -1.0]]


def test_a_shared_reward_is_every_agents_baseline():
    assert greedy_baselines(_Stub(0.5), [NODE]) == [[0.5, 0.5]]


def test_a_reward_row_of_the_wrong_width_is_named():
    with pytest.raises(ValueError, match="3 values for 2 agents"):
        greedy_baselines(_Stub([1.0, 2.0, 3.0]), [NODE])
