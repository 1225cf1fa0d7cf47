"""The dual clip and the log-ratio clamp of comlrl.core.algos.losses against hand values (the numbers
of the second algorithms audit: a ratio of 10 with A = -1 costs 10 without the dual clip and 3
with it; a token log-ratio of 100 stays finite)."""

import math

import pytest
import torch

from comlrl.core.algos.losses import LOG_RATIO_BOUND, clipped_surrogate


def _one_token(log_ratio, adv, **kw):
    lr = torch.tensor([[log_ratio]], requires_grad=True)
    loss, metrics = clipped_surrogate(
        lr, torch.ones(1, 1), torch.tensor([adv]), torch.tensor([1.0]), 0.2, 0.2, **kw
    )
    loss.backward()
    return loss.item(), lr.grad.item(), metrics


def test_dual_clip_caps_a_negative_advantage_at_c():
    loss, grad, metrics = _one_token(math.log(10.0), -1.0)
    assert loss == pytest.approx(3.0)
    assert grad == 0.0
    assert metrics["clip_fraction"] == 1.0


def test_without_the_dual_clip_the_stale_token_costs_its_ratio():
    loss, grad, _ = _one_token(math.log(10.0), -1.0, clip_ratio_c=None)
    assert loss == pytest.approx(10.0, rel=1e-6)
    assert grad == pytest.approx(10.0, rel=1e-6)


@pytest.mark.parametrize("rho, want", [(2.0, 2.0), (0.5, 0.8)])
def test_dual_clip_leaves_ratios_below_c_alone(rho, want):
    # A = -1: PPO keeps max(rho, 1 - eps) for rho < c = 3
    loss, _, _ = _one_token(math.log(rho), -1.0)
    assert loss == pytest.approx(want, rel=1e-6)


def test_dual_clip_never_touches_positive_advantages():
    loss, grad, _ = _one_token(math.log(10.0), 1.0, clip_ratio_c=2.0)
    assert loss == pytest.approx(-1.2)
    assert grad == 0.0


def test_a_huge_token_log_ratio_is_clamped_before_exp():
    loss, _, metrics = _one_token(100.0, -1.0, clip_ratio_c=None)
    assert loss == pytest.approx(math.exp(LOG_RATIO_BOUND), rel=1e-5)
    assert math.isfinite(metrics["approx_kl"])
