"""MADPO's agent-by-agent backward (``dpo_backward='agentwise'``, the default) trains as the
joint backward does: the same weights after seeded runs, whatever the loss's extra terms."""

import pytest
import torch

from comlrl.core.rewards import set_reward_range
from comlrl.pbrl import MADPOConfig, MADPOTrainer

from .helpers import FAST, PROMPTS, ratio_reward, two_agents


def opposed(a, b):
    """In [0, 1]; per-agent rewards, so each pair trains the agent that ranked it."""
    return [[min(1.0, len(x) / 20.0), 1.0 - min(1.0, len(y) / 20.0)] for x, y in zip(a, b)]


set_reward_range(opposed, 0.0, 1.0)


def _weights(tmp_path, name, reward, **cfg):
    agents, tok = two_agents()
    base = {**FAST, "preference_num_candidates": 4, "preference_pairs_per_sample": 3}
    base.update(num_train_epochs=2, train_batch_size=3, output_dir=str(tmp_path / name))
    base.update(cfg)
    trainer = MADPOTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:3],
        reward_func=reward,
        args=MADPOConfig(**base),
    )
    trainer.train()
    assert trainer.updates_seen > 0
    return [{n: p.detach().clone() for n, p in m.named_parameters()} for m in trainer.agents]


@pytest.mark.parametrize(
    "reward, cfg",
    [
        (ratio_reward, {}),
        (ratio_reward, {"reference_free": False, "dpo_nll_coef": 0.5}),
        (ratio_reward, {"logprob_max_tokens": 24}),  # several pair groups per update
        (opposed, {}),  # pairs owned by one agent: the other's rows are constants
    ],
    ids=["plain", "reference-and-nll", "grouped", "per-agent-rewards"],
)
def test_agentwise_backward_trains_as_the_joint_one(tmp_path, reward, cfg):
    joint = _weights(tmp_path, "joint", reward, dpo_backward="joint", **cfg)
    split = _weights(tmp_path, "split", reward, dpo_backward="agentwise", **cfg)
    moved = False
    for a, b, start in zip(joint, split, [m.state_dict() for m in two_agents()[0]]):
        for name in a:
            torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-6)
            moved = moved or not torch.equal(a[name], start[name])
    assert moved


def test_auto_goes_agent_by_agent_only_where_the_joint_graphs_would_be_large(tmp_path, monkeypatch):
    from comlrl.pbrl import PreferencePair, madpo

    agents, tok = two_agents()
    trainer = MADPOTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=ratio_reward,
        args=MADPOConfig(**FAST, output_dir=str(tmp_path / "run")),
    )
    assert trainer.args.dpo_backward == "auto"
    ids = [[1, 2, 3]] * 2
    pairs = [PreferencePair(["p"] * 2, ["w"] * 2, ["l"] * 2, ids, ids, ids, 1.0, 0.0, 0.5)] * 4
    assert not trainer._agentwise(pairs)  # a tiny model's graphs are small: one joint backward
    # At a real model's activations per token, the joint graphs pass one forward's budget.
    monkeypatch.setattr(madpo, "activation_bytes_per_token", lambda model: 100 << 20)
    assert trainer._agentwise(pairs)
    assert not trainer._agentwise([])  # nothing to hold
    trainer.args.dpo_backward = "joint"
    assert not trainer._agentwise(pairs)
