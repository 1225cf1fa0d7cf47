"""Masking truncated completions and dropping tied groups: the rules and their effect on an
update."""

import math

import torch

from comlrl.core.logging.jsonl import read_metrics
from comlrl.reinforce.filters import has_spread, is_truncated

from .helpers import make_trainer

EOS = 2


def test_truncation_rule():
    assert is_truncated([5, 6, 7], EOS, 3)  # hit the cap without EOS
    assert not is_truncated([5, 6, EOS], EOS, 3)  # finished on the last token
    assert not is_truncated([5, EOS], EOS, 3)
    assert not is_truncated([5, 6], EOS, 3)  # stopped early for another reason
    assert is_truncated([5, 6, 7], None, 3)


def test_spread_rule():
    assert not has_spread([1.0, 1.0, 1.0])
    assert not has_spread([0.3, 0.1 + 0.2])  # float noise is a tie
    assert has_spread([1.0, 1.0, 1.0001])
    assert not has_spread([4.0])


def _weights(models):
    return [torch.cat([p.detach().flatten() for p in m.parameters()]) for m in models]


def test_all_truncated_rows_leave_the_loss(tmp_path):
    # two new tokens: the tiny untrained agents never finish, so every row is masked
    trainer = make_trainer(tmp_path, max_new_tokens=2, mask_truncated_completions=True)
    trainer.train()
    recs = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "agent_0/loss" in r]
    assert recs and all(r["agent_0/truncated_fraction"] == 1.0 for r in recs)
    assert all(r["agent_0/loss"] == 0.0 and r["agent_0/grad_norm"] == 0.0 for r in recs)


def test_tied_groups_are_dropped(tmp_path):
    trainer = make_trainer(
        tmp_path, reward=lambda a, b: [1.0] * len(a), drop_zero_variance_groups=True
    )
    before = _weights(trainer.agents)
    trainer.train()
    recs = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "agent_0/loss" in r]
    # every group ties: each drain drops its 2 nodes and takes no step
    assert recs and all(r["agent_0/dropped_groups"] == 2.0 for r in recs)
    assert all(math.isnan(float(r["agent_0/loss"])) for r in recs)  # JSON writes NaN as text
    for b, a in zip(before, _weights(trainer.agents)):
        assert torch.equal(a, b)


def test_tied_rewards_with_different_kl_penalties_are_kept(tmp_path, monkeypatch):
    import comlrl.core.rewards.shaping as shaping

    # every completion's KL differs, so the KL-shaped returns of each group differ
    monkeypatch.setattr(
        shaping,
        "sequence_kl",
        lambda pol, ref, p, c, pad, **_: [0.1 * (j + 1) for j in range(len(p))],
    )
    trainer = make_trainer(
        tmp_path,
        reward=lambda a, b: [1.0] * len(a),
        drop_zero_variance_groups=True,
        reference_kl_enabled=True,
        reference_kl_coef=0.5,
    )
    before = _weights(trainer.agents)
    trainer.train()
    recs = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "agent_0/loss" in r]
    # the groups keep their KL penalty: none is dropped and the agents move
    assert recs and all(r["agent_0/dropped_groups"] == 0.0 for r in recs)
    assert any(not torch.equal(a, b) for b, a in zip(before, _weights(trainer.agents)))
