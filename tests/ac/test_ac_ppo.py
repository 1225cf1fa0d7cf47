"""IPPO / MAPPO: the actor-critic family's clipped-ratio actor loss (``policy_loss="ppo"``),
several passes per rollout (``num_iterations``), and their config checks."""

import math

import pytest
import torch

from comlrl.ac import IACConfig, MAACConfig
from comlrl.ac.ppo import actor_loss
from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.logprobs import TokenLogprobs
from comlrl.core.rollout.record import ValueGroup

from .helpers import make_iac, make_maac


def _row(old=None):
    """A row (group, index) of a one-completion group; ``old`` its rollout log-probs."""
    size = 2 if old is None else len(old)
    group = ValueGroup(0, 0, 0, [1], [[2] * size], [0.0], old_logps=[] if old is None else [old])
    return group, 0


class _Args:
    epsilon, epsilon_high = 0.2, None

    def __init__(self, policy_loss):
        self.policy_loss = policy_loss


def _grad(policy_loss):
    values = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.7, 0.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    batch = [_row([-1.0, -2.0, -0.5]), _row([-0.3, -1.7])]
    w = torch.tensor([0.75, -0.25])
    loss, metrics = actor_loss(_Args(policy_loss), TokenLogprobs(values, mask), w, batch)
    loss.backward()
    return loss.item(), values.grad, metrics


def test_ratio_loss_at_the_rollout_policy_has_the_on_policy_gradient():
    on_loss, want, none = _grad("reinforce")
    loss, got, metrics = _grad("ppo")
    assert none == {}
    assert torch.equal(got, want)
    # on-policy: -(0.75 * (-3.5) - 0.25 * (-2.0)); surrogate at ratio 1: -(0.75 * 3 - 0.25 * 2)
    assert on_loss == pytest.approx(2.125)
    assert loss == pytest.approx(-1.75)
    assert metrics == {"clip_fraction": 0.0, "approx_kl": 0.0}


def test_ratio_loss_without_rollout_logprobs_raises():
    values = torch.zeros(1, 2, requires_grad=True)
    bare = _row()
    with pytest.raises(ValueError, match="old_logps"):
        actor_loss(_Args("ppo"), TokenLogprobs(values, torch.ones(1, 2)), torch.ones(1), [bare])


@pytest.mark.parametrize("cls", [IACConfig, MAACConfig])
def test_config_errors_name_the_field(cls):
    with pytest.raises(ValueError, match="epsilon"):
        cls(policy_loss="ppo", epsilon=0.0)
    with pytest.raises(ValueError, match="epsilon_high"):
        cls(policy_loss="ppo", epsilon_high=-0.1)
    with pytest.raises(ValueError, match="num_iterations"):
        cls(policy_loss="ppo", num_iterations=0)
    with pytest.raises(ValueError, match="num_iterations=2 reuses each rollout"):
        cls(num_iterations=2)
    with pytest.raises(ValueError, match="epsilon=0.3"):
        cls(epsilon=0.3)
    with pytest.raises(ValueError, match="policy_loss must be one of"):
        cls(policy_loss="clipped")
    assert cls(policy_loss="gspo", num_iterations=2).num_iterations == 2  # a ratio loss
    with pytest.raises(ValueError, match="clip_ratio_c"):
        cls(policy_loss="ppo", clip_ratio_c=1.0)
    with pytest.raises(ValueError, match="clip_ratio_c=5 has no effect"):
        cls(clip_ratio_c=5)
    c = cls(policy_loss="ppo", num_iterations=3, epsilon_high=0.28)
    assert (c.num_iterations, c.epsilon, c.epsilon_high) == (3, 0.2, 0.28)


def _weights(trainer):
    models = (
        list(trainer.agents) + list(trainer.critics) + list(getattr(trainer, "value_heads", []))
    )
    return [torch.cat([p.detach().flatten() for p in m.parameters()]) for m in models]


@pytest.mark.parametrize(
    "build, kw",
    [(make_iac, {}), (make_iac, {"separate": False}), (make_maac, {})],
    ids=["iac", "iac-value-head", "maac"],
)
def test_one_iteration_of_the_ratio_loss_trains_like_the_on_policy_loss(tmp_path, build, kw):
    on = build(tmp_path / "on", **kw)
    on.train()
    ratio = build(tmp_path / "ppo", policy_loss="ppo", **kw)
    ratio.train()
    for a, b in zip(_weights(on), _weights(ratio), strict=True):
        assert torch.allclose(a, b, rtol=0.0, atol=1e-6)


@pytest.mark.parametrize("build", [make_iac, make_maac], ids=["ippo", "mappo"])
def test_two_iterations_log_clip_fraction_and_approx_kl(tmp_path, build):
    trainer = build(tmp_path, policy_loss="ppo", num_iterations=2, epsilon_high=0.28)
    trainer.train()
    recs = [
        r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "agent_0/actor_loss" in r
    ]
    assert recs
    for r in recs:
        for i in (0, 1):
            clip, kl = r[f"agent_{i}/clip_fraction"], r[f"agent_{i}/approx_kl"]
            assert math.isfinite(clip) and 0.0 <= clip <= 1.0
            # the second pass scores a policy that one step has moved from the rollout's
            assert math.isfinite(kl) and kl > 0.0


def test_the_on_policy_loss_logs_no_ratio_metrics(tmp_path):
    trainer = make_iac(tmp_path)
    trainer.train()
    recs = [
        r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "agent_0/actor_loss" in r
    ]
    assert recs and not any("agent_0/clip_fraction" in r for r in recs)
