"""Clipped-ratio losses (PPO token ratio, GSPO sequence ratio) against hand values; at the
rollout policy their gradient equals the on-policy REINFORCE loss's; num_iterations reuse."""

import math
from types import SimpleNamespace

import pytest
import torch

from comlrl.core.algos.losses import gspo_loss, ppo_loss, reinforce_loss
from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.logprobs import TokenLogprobs
from comlrl.core.testing import tiny_pair
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

from .helpers import PROMPTS, length_reward, make_config, make_trainer

CFG = SimpleNamespace(epsilon=0.2, epsilon_high=None)


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    values = (-torch.rand(3, 4, generator=g) * 3).requires_grad_(True)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    adv = torch.tensor([1.5, -0.5, 0.25])
    w = torch.tensor([0.25, 0.5, 0.125])
    return values, mask, adv, w


def _grad(loss_fn, old=True):
    values, mask, adv, w = _batch()
    lp = TokenLogprobs(values, mask)
    loss, metrics = loss_fn(lp, values.detach().clone() if old else None, adv, w, CFG)
    loss.backward()
    return loss, values.grad, metrics


def test_ppo_at_the_rollout_policy_has_exactly_the_reinforce_gradient():
    _, want, _ = _grad(reinforce_loss, old=False)
    loss, got, metrics = _grad(ppo_loss)
    assert torch.equal(got, want)
    _, mask, adv, w = _batch()
    # every ratio is 1: the surrogate is -sum_r w_r A_r L_r
    assert loss.item() == pytest.approx(-(w * adv * mask.sum(-1)).sum().item())
    assert metrics == {"clip_fraction": 0.0, "approx_kl": 0.0}


def test_gspo_at_the_rollout_policy_has_the_reinforce_gradient():
    _, want, _ = _grad(reinforce_loss, old=False)
    _, got, metrics = _grad(gspo_loss)
    assert torch.allclose(got, want, atol=1e-7)
    assert metrics["clip_fraction"] == 0.0


def _two_tokens(log_ratios, adv):
    values = torch.tensor([[0.0, 0.0]], requires_grad=True)
    old = -torch.tensor([log_ratios])  # logp - old = log_ratios
    return values, TokenLogprobs(values, torch.ones(1, 2)), old, torch.tensor([adv])


@pytest.mark.parametrize(
    "adv, eps_high, loss, grads, clipped",
    [
        # rho = [1.5, 0.5], eps 0.2: A>0 clips the 1.5 at 1.2 (no gradient), keeps 0.5
        (1.0, None, -(1.2 + 0.5), [0.0, -0.5], 0.5),
        # A<0 keeps -1.5 (gradient +rho), clips the 0.5 at 0.8
        (-1.0, None, 1.5 + 0.8, [1.5, 0.0], 0.5),
        # clip-higher: 1 + 0.6 = 1.6 > 1.5, so nothing is clipped for A>0
        (1.0, 0.6, -(1.5 + 0.5), [-1.5, -0.5], 0.0),
    ],
)
def test_ppo_clipping_hand_values(adv, eps_high, loss, grads, clipped):
    values, lp, old, a = _two_tokens([math.log(1.5), math.log(0.5)], adv)
    cfg = SimpleNamespace(epsilon=0.2, epsilon_high=eps_high)
    got, metrics = ppo_loss(lp, old, a, torch.tensor([1.0]), cfg)
    assert got.item() == pytest.approx(loss)
    got.backward()
    assert values.grad[0].tolist() == pytest.approx(grads)
    assert metrics["clip_fraction"] == pytest.approx(clipped)
    kl = ((0.5 - math.log(1.5)) + (-0.5 - math.log(0.5))) / 2
    assert metrics["approx_kl"] == pytest.approx(kl, rel=1e-5)


@pytest.mark.parametrize(
    "eps_high, loss, clipped",
    [
        (None, -2 * 1.2, 1.0),  # s = exp(log(2)/2) = sqrt 2 > 1.2: both tokens clipped
        (0.5, -2 * math.sqrt(2), 0.0),  # sqrt 2 < 1.5: kept
    ],
)
def test_gspo_hand_values(eps_high, loss, clipped):
    _, lp, old, a = _two_tokens([math.log(2.0), 0.0], 1.0)
    cfg = SimpleNamespace(epsilon=0.2, epsilon_high=eps_high)
    got, metrics = gspo_loss(lp, old, a, torch.tensor([1.0]), cfg)
    assert got.item() == pytest.approx(loss, rel=1e-6)
    assert metrics["clip_fraction"] == pytest.approx(clipped)


def test_reuse_needs_a_ratio_loss():
    with pytest.raises(ValueError, match="num_iterations=2 reuses each rollout"):
        MAGRPOConfig(num_iterations=2)
    with pytest.raises(ValueError, match="epsilon=0.3 has no effect"):
        MAGRPOConfig(epsilon=0.3)
    cfg = MAGRPOConfig(policy_loss="ppo", num_iterations=2, epsilon_high=0.28)
    assert (cfg.epsilon, cfg.epsilon_high) == (0.2, 0.28)


def _weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_ppo_with_one_iteration_trains_like_reinforce(tmp_path):
    on = make_trainer(tmp_path / "a")
    on.train()
    ratio = make_trainer(tmp_path / "b", policy_loss="ppo")
    ratio.train()
    for a, b in zip(on.agents, ratio.agents):
        # the rollout's and the update's forwards differ only in float rounding
        assert torch.allclose(_weights(a), _weights(b), atol=1e-5)


def test_several_iterations_log_clip_metrics(tmp_path):
    trainer = make_trainer(tmp_path, policy_loss="gspo", num_iterations=3)
    trainer.train()
    recs = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "agent_0/loss" in r]
    assert recs
    for r in recs:
        assert 0.0 <= r["agent_0/clip_fraction"] <= 1.0
        assert r["agent_0/approx_kl"] >= 0.0


def test_a_rollout_spanning_two_buffers_corrects_the_second(tmp_path):
    """One decode pass per agent over two buffers' items; the first buffer's update is
    on-policy (every ratio is 1), the second's ratio sees how far the first update moved the
    policy, through the log-probs taken at rollout."""
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    trainer = MAGRPOTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS,
        reward_func=length_reward,
        args=make_config(
            policy_loss="ppo",
            rollout_buffer_size=2,
            rollout_batch_size=4,
            agent_learning_rate=3e-2,
            output_dir=str(tmp_path / "run"),
        ),
    )
    calls = []
    real = trainer.rollout_backend.generate
    trainer.rollout_backend.generate = lambda *a, **k: calls.append(a[0]) or real(*a, **k)
    trainer.train()
    assert calls == [0, 1]  # one decode pass per agent for all four items
    recs = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "agent_0/loss" in r]
    assert len(recs) == 2
    for agent in (0, 1):
        first, second = (r[f"agent_{agent}/approx_kl"] for r in recs)
        assert first < 1e-9
        assert second > 1e-4
