"""MAReMax's greedy baseline with per-agent rewards: one baseline per agent, each the agent's
own reward for the greedy joint response (the audit's c6 stub crashed with `float(list)`)."""

import contextlib
import types

import pytest

from comlrl.core.loop import ItemBatch
from comlrl.core.rollout.generation import SamplingParams
from comlrl.core.testing import tiny_pair
from comlrl.reinforce import MAReMaxConfig, MAReMaxTrainer
from comlrl.reinforce.greedy import greedy_baselines

from .helpers import PROMPTS


class _Stub:
    """The trainer surface greedy_baselines reads, scoring every joint action ``rewards``."""

    num_agents = 2
    generation_kwargs: dict = {}

    def __init__(self, rewards):
        self.rewards = rewards

    def sampling_params(self, kw):
        return SamplingParams()

    def timed(self, name):
        return contextlib.nullcontext()

    def generate_per_agent(self, prompts, n, params):
        return [[types.SimpleNamespace(texts=["x"]) for _ in p] for p in prompts]

    def score(self, completions, prompts, batch_items):
        return [self.rewards for _ in prompts]


NODE = types.SimpleNamespace(prompts=["a", "b"], raw_prompts=["a"], item={})


def test_per_agent_rewards_give_one_baseline_per_agent():
    assert greedy_baselines(_Stub([1.0, -1.0]), [NODE, NODE]) == [[1.0, -1.0], [1.0, -1.0]]


def test_a_shared_reward_is_every_agents_baseline():
    assert greedy_baselines(_Stub(0.5), [NODE]) == [[0.5, 0.5]]


def test_a_reward_row_of_the_wrong_width_is_named():
    with pytest.raises(ValueError, match="3 values for 2 agents"):
        greedy_baselines(_Stub([1.0, 2.0, 3.0]), [NODE])


def _own_lengths(c0, c1):
    # agent 0 is paid its own length, agent 1 minus its own: per agent, never shared
    return [float(len(c0[0])), -float(len(c1[0]))]


def test_each_agent_is_measured_against_its_own_greedy_reward(tmp_path):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    trainer = MAReMaxTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=_own_lengths,
        args=MAReMaxConfig(
            output_dir=str(tmp_path / "run"),
            num_train_epochs=1,
            num_generations=2,
            max_new_tokens=6,
            num_turns=1,
            temperature=1.0,
            top_p=1.0,
            top_k=None,
            rollout_buffer_size=2,
            reward_call_mode="per_sample",
            eval_interval=0,
            seed=0,
        ),
    )
    batch = trainer.collect(ItemBatch(0, 2, items=list(PROMPTS[:2]), offset=0))
    for rec in batch.records:
        s0, s1 = rec.samples[0][0], rec.samples[1][0]
        assert s0.baseline >= 0.0 >= s1.baseline
        assert s0.baseline != s1.baseline
        for s in (s0, s1):
            adv = trainer.advantages_for([s])[0].tolist()
            assert adv == pytest.approx([r - s.baseline for r in s.returns])
    trainer.train()
