"""Per-agent rewards in the preference family: pairs ranked by one agent's own reward train only
that agent; MARLHF's reward model learns each agent's reward."""

import pytest
import torch

from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.rewards import set_reward_range
from comlrl.pbrl import (
    MADPOConfig,
    MADPOIterConfig,
    MADPOIterTrainer,
    MADPOTrainer,
    MARLHFConfig,
    MARLHFTrainer,
    PreferencePair,
)
from comlrl.pbrl.madpo import owned_rows
from comlrl.pbrl.reward_model import format_joint_text

from .helpers import FAST, PROMPTS, snapshot, two_agents


def agent0_only(a, b):
    """In [0, 1]. Agent 0 is rewarded for its own length; agent 1 always gets 0 (so its
    candidates always tie and it makes no pairs)."""
    return [[min(1.0, len(x) / 20.0), 0.0] for x in a]


def opposed(a, b):
    """In [0, 1]. The agents disagree: agent 1 prefers what agent 0 dislikes."""
    return [[min(1.0, len(x) / 20.0), 1.0 - min(1.0, len(x) / 20.0)] for x in a]


set_reward_range(agent0_only, 0.0, 1.0)
set_reward_range(opposed, 0.0, 1.0)


def _moved(model, snap) -> bool:
    return any(not torch.equal(p.detach(), snap[n]) for n, p in model.named_parameters())


def _madpo(tmp_path, reward, **cfg):
    agents, tok = two_agents()
    base = {**FAST, "preference_num_candidates": 4, "preference_pairs_per_sample": 2}
    base.update(weight_decay=0.0, output_dir=str(tmp_path / "run"), **cfg)
    return MADPOTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=reward,
        args=MADPOConfig(**base),
    )


def test_madpo_pairs_of_agent_0_move_only_agent_0(tmp_path):
    trainer = _madpo(tmp_path, agent0_only)
    before = snapshot(trainer.agents)
    trainer.train()
    pairs = trainer.preference_pairs
    assert pairs and {p.agent for p in pairs} == {0}
    for p in pairs:
        assert p.winner_reward > p.loser_reward
        assert p.winner_reward == pytest.approx(min(1.0, len(p.winner_completions[0]) / 20.0))
    assert _moved(trainer.agents[0], before[0])
    assert not _moved(trainer.agents[1], before[1])


def test_madpo_ranks_the_candidates_once_per_agent(tmp_path):
    trainer = _madpo(tmp_path, opposed, num_train_epochs=1)
    trainer.train()
    pairs = trainer.preference_pairs
    assert {p.agent for p in pairs} == {0, 1}
    for p in pairs:
        # agent 1's winner is agent 0's loser: the same joint candidates, ranked the other way
        own = [min(1.0, len(p.winner_completions[0]) / 20.0)]
        other = [min(1.0, len(p.loser_completions[0]) / 20.0)]
        if p.agent == 0:
            assert own[0] > other[0]
        else:
            assert own[0] < other[0]
    again = PreferencePair.from_record(pairs[0].to_record())
    assert again.agent == pairs[0].agent


def test_owned_rows_detach_only_other_agents_pairs():
    pairs = [
        PreferencePair(["p"], ["w"], ["l"], [[1]], [[2]], [[3]], 1.0, 0.0, 0.5, agent=agent)
        for agent in (0, 1, None)
    ]
    values = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], requires_grad=True)
    (owned_rows(values, pairs, 0) * torch.arange(1.0, 7.0)).sum().backward()
    # winners then losers: pair 1 (agent 1's) carries no gradient to actor 0
    assert values.grad.tolist() == [1.0, 0.0, 3.0, 4.0, 0.0, 6.0]
    shared = [p for p in pairs if p.agent is None]
    assert owned_rows(values, shared, 0) is values


def test_madpo_iter_pairs_target_and_comparator_per_agent(tmp_path):
    agents, tok = two_agents()
    cfg = MADPOIterConfig(
        **FAST,
        num_iterations=1,
        preference_num_candidates=3,
        comparator_num_candidates=3,
        preference_pairs_per_sample=2,
        comparator_policy="current",
        weight_decay=0.0,
        output_dir=str(tmp_path / "run"),
    )
    trainer = MADPOIterTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=agent0_only, args=cfg
    )
    before = snapshot(trainer.agents)
    trainer.train()
    pairs = trainer.iteration_pairs
    assert pairs and {p.agent for p in pairs} == {0}
    assert all(p.winner_reward > p.loser_reward for p in pairs)
    assert _moved(trainer.agents[0], before[0])
    assert not _moved(trainer.agents[1], before[1])


def test_marlhf_reward_model_learns_each_agents_reward(tmp_path):
    agents, tok = two_agents()
    base = {**FAST, "preference_num_candidates": 3, "preference_pairs_per_sample": 2}
    base.update(
        num_train_epochs=1,
        num_generations=2,
        rollout_buffer_size=2,
        reward_num_train_epochs=1,
        reward_learning_rate=1e-3,
        output_dir=str(tmp_path / "run"),
    )
    trainer = MARLHFTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=opposed,
        args=MARLHFConfig(**base),
    )
    trainer.train()
    assert trainer.reward_model_per_agent
    rows = trainer.rm_reward(["a", "bbb"], ["c", "d"], prompts=["p", "q"], batch_items=PROMPTS[:2])
    assert len(rows) == 2 and all(len(r) == 2 for r in rows)
    assert rows[0][0] != rows[0][1]  # the agent named in the text changes the score
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert any("turn_1/agent_1_reward_mean" in r for r in records)
    text = format_joint_text(["p0", "p1"], ["c0", "c1"], agent=1)
    assert text.endswith("\n\nReward of agent 2")
