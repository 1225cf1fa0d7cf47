"""MARLOO and MAReMax defaults (RLOO without std normalization, ReMax's greedy baseline) and the
greedy baseline against hand values and an independent greedy rollout."""

import dataclasses
import math

import pytest

from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.loop import ItemBatch
from comlrl.core.rollout import rollouts
from comlrl.core.rollout.record import RolloutGroup
from comlrl.core.testing import tiny_pair
from comlrl.reinforce import (
    MAGRPOConfig,
    MAREINFORCEConfig,
    MAReMaxConfig,
    MAReMaxTrainer,
    MARLOOConfig,
)

from .helpers import PROMPTS, advantages_of, length_reward

FAST = dict(
    num_train_epochs=1,
    num_generations=2,
    max_new_tokens=6,
    num_turns=1,
    temperature=1.0,
    top_p=1.0,
    top_k=None,
    rollout_buffer_size=2,
    agent_learning_rate=1e-3,
    logging_steps=1,
    eval_interval=0,
    seed=0,
)


def test_defaults_of_the_variants():
    assert MAGRPOConfig().advantage_normalization
    assert MAREINFORCEConfig().advantage_normalization
    assert MARLOOConfig().advantage_mode == "rloo"
    assert not MARLOOConfig().advantage_normalization
    remax = MAReMaxConfig()
    assert remax.advantage_mode == "greedy" and not remax.advantage_normalization
    assert remax.uses_greedy_baseline() and not MAGRPOConfig().uses_greedy_baseline()
    assert not MAReMaxConfig(advantage_mode="max").uses_greedy_baseline()


def test_bad_baseline_names_the_field():
    with pytest.raises(ValueError, match="advantage_mode"):
        MAReMaxConfig(advantage_mode="median")


def test_fixed_baseline_hand_values():
    assert advantages_of([1.0, 2.0, 4.0], "greedy", False, baseline=2.0).tolist() == [
        -1.0,
        0.0,
        2.0,
    ]
    rms = math.sqrt((1 + 0 + 4) / 3)
    got = advantages_of([1.0, 2.0, 4.0], "greedy", True, baseline=2.0).tolist()
    assert got == pytest.approx([-1 / rms, 0.0, 2 / rms])


def _remax(tmp_path, reward=length_reward, **cfg):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    return MAReMaxTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=reward,
        args=MAReMaxConfig(output_dir=str(tmp_path / "run"), **{**FAST, **cfg}),
    )


def test_greedy_baseline_is_the_reward_of_an_independent_greedy_rollout(tmp_path):
    trainer = _remax(tmp_path)
    batch = trainer.collect(ItemBatch(0, 2, items=list(PROMPTS[:2]), offset=0))
    samples = [rec.samples[0][0] for rec in batch.entries]
    greedy = dataclasses.replace(rollouts.sampling_params(trainer), do_sample=False)
    texts = []
    for agent in range(2):
        formatted = [trainer.formatters[agent](item) for item in PROMPTS[:2]]
        out = trainer.rollout_backend.generate(agent, formatted, 1, greedy)
        texts.append([o.texts[0] for o in out])
    want = length_reward(texts[0], texts[1])
    got = sorted(s.baseline for s in samples)
    assert got == pytest.approx(sorted(want))
    s = samples[0]
    adv = trainer.advantages_for([s])[0].tolist()
    assert adv == pytest.approx([r - s.baseline for r in s.returns])


def test_greedy_baseline_cost_is_logged(tmp_path):
    trainer = _remax(tmp_path)
    trainer.train()
    recs = read_metrics(tmp_path / "run" / "metrics.jsonl")
    timed = [r["timing/greedy_baseline"] for r in recs if "timing/greedy_baseline" in r]
    assert timed and all(t > 0 for t in timed)


def test_max_baseline_keeps_the_group_max(tmp_path):
    trainer = _remax(tmp_path, advantage_mode="max")
    s = RolloutGroup(
        agent=0,
        turn=0,
        step=3,
        prompt_ids=[1, 2],
        completion_ids=[[3], [4], [5]],
        returns=[1.0, 3.0, 2.0],
    )
    assert trainer.advantages_for([s])[0].tolist() == [-2.0, 0.0, -1.0]
    assert "timing/greedy_baseline" not in trainer.timing.phases


def _own_lengths(c0, c1):
    # agent 0 is paid its own length, agent 1 minus its own: per agent, never shared
    return [float(len(c0[0])), -float(len(c1[0]))]


def test_each_agent_is_measured_against_its_own_greedy_reward(tmp_path):
    trainer = _remax(tmp_path, _own_lengths, reward_call_mode="per_sample")
    batch = trainer.collect(ItemBatch(0, 2, items=list(PROMPTS[:2]), offset=0))
    for rec in batch.entries:
        s0, s1 = rec.samples[0][0], rec.samples[1][0]
        assert s0.baseline >= 0.0 >= s1.baseline
        assert s0.baseline != s1.baseline
        for s in (s0, s1):
            adv = trainer.advantages_for([s])[0].tolist()
            assert adv == pytest.approx([r - s.baseline for r in s.returns])
    trainer.train()
