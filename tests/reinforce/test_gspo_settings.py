"""GSPO's per-sequence aggregation, its clip range and its log-ratio clamp (hand values of
the second algorithms audit: rows of 4 and 40 tokens got row gradients 2 and 20 under `sum`)."""

import math
from types import SimpleNamespace

import pytest
import torch

from comlrl.core.algos.losses import SEQUENCE_LOG_RATIO_MAX, gspo_loss
from comlrl.core.logprobs import TokenLogprobs
from comlrl.reinforce import MAGRPOConfig
from comlrl.reinforce.algos import row_weights


def _row_gradients(aggregation):
    lengths = [4, 40]
    mask = torch.zeros(2, 40)
    for r, n in enumerate(lengths):
        mask[r, :n] = 1.0
    old = -mask
    values = old.clone().requires_grad_(True)
    w = torch.tensor(row_weights(lengths, [2, 2], 1, aggregation, 64))
    cfg = SimpleNamespace(epsilon=0.2, epsilon_high=None)
    loss, _ = gspo_loss(TokenLogprobs(values, mask), old, torch.ones(2), w, cfg)
    grad = torch.autograd.grad(loss, values)[0]
    return grad[0].sum().item(), grad[1].sum().item()


def test_gspo_config_weighs_every_completion_once():
    cfg = MAGRPOConfig(policy_loss="gspo")
    assert cfg.loss_aggregation == "sequence_mean"
    short, long = _row_gradients(cfg.loss_aggregation)
    # each row's gradient is -w_r = -1/(K·groups) = -0.5, whatever its length
    assert short == pytest.approx(-0.5)
    assert long == pytest.approx(-0.5)


def test_sum_weighting_would_scale_rows_by_length():
    short, long = _row_gradients("sum")
    assert (short, long) == (pytest.approx(-2.0), pytest.approx(-20.0))


@pytest.mark.parametrize("agg", ["token_mean", "constant"])
def test_gspo_refuses_another_aggregation(agg):
    with pytest.raises(ValueError, match=f"loss_aggregation='{agg}' does not apply"):
        MAGRPOConfig(policy_loss="gspo", loss_aggregation=agg)
    with pytest.raises(ValueError, match="loss_aggregation"):
        MAGRPOConfig.preset("dr_grpo", policy_loss="gspo")


def test_gspo_clips_in_its_papers_range_unless_told_otherwise():
    cfg = MAGRPOConfig(policy_loss="gspo")
    assert (cfg.epsilon, cfg.epsilon_high) == (3e-4, 4e-4)
    cfg = MAGRPOConfig(policy_loss="gspo", epsilon=0.2)
    assert (cfg.epsilon, cfg.epsilon_high) == (0.2, None)
    cfg = MAGRPOConfig(policy_loss="gspo", epsilon_high=0.3)
    assert (cfg.epsilon, cfg.epsilon_high) == (0.2, 0.3)
    assert MAGRPOConfig(policy_loss="ppo").epsilon == 0.2
    assert MAGRPOConfig().epsilon is None  # no ratio loss, no clip range


def test_a_huge_sequence_log_ratio_gives_a_finite_loss():
    values = torch.full((1, 4), 100.0, requires_grad=True)
    mask = torch.ones(1, 4)
    adv, w = torch.tensor([-1.0]), torch.tensor([1.0])
    off = SimpleNamespace(epsilon=0.2, epsilon_high=None, clip_ratio_c=None)
    loss, metrics = gspo_loss(TokenLogprobs(values, mask), torch.zeros(1, 4), adv, w, off)
    # clamped at 10: -min(e^10·(-1), 1.2·(-1)) summed over 4 tokens
    assert loss.item() == pytest.approx(4 * math.exp(SEQUENCE_LOG_RATIO_MAX), rel=1e-5)
    assert math.isfinite(metrics["approx_kl"])
    on = SimpleNamespace(epsilon=0.2, epsilon_high=None, clip_ratio_c=3.0)
    loss, _ = gspo_loss(TokenLogprobs(values, mask), torch.zeros(1, 4), adv, w, on)
    assert loss.item() == pytest.approx(4 * 3.0)
    (grad,) = torch.autograd.grad(loss, values)
    assert torch.equal(grad, torch.zeros_like(grad))


def test_clip_ratio_c_is_checked():
    with pytest.raises(ValueError, match="clip_ratio_c"):
        MAGRPOConfig(policy_loss="ppo", clip_ratio_c=1.0)
    with pytest.raises(ValueError, match="clip_ratio_c=5 has no effect"):
        MAGRPOConfig(clip_ratio_c=5)
    assert MAGRPOConfig(policy_loss="ppo", clip_ratio_c=None).clip_ratio_c is None
