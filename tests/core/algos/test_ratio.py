"""PPO's clipped surrogate (comlrl.core.algos.losses) against hand-derived numbers: ratios clipped
above and below, positive and negative advantages, clip-higher, padded tokens ignored."""

import math

import pytest
import torch

from comlrl.core.algos.losses import clip_range, clipped_surrogate, padded_rows

# Row 0 has A = +2 and ratios 1.5 (above 1.2: clipped), 0.7 (below 0.8, but A > 0 keeps the
# smaller unclipped term), 1.1 (inside). Row 1 has A = -1 and ratios 0.5 (below 0.8 with A < 0:
# clipped), 1.3 (above, but A < 0 keeps the unclipped term) and a padded token.
RATIOS = [[1.5, 0.7, 1.1], [0.5, 1.3, 3.0]]
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
ADV = torch.tensor([2.0, -1.0])
WEIGHTS = torch.tensor([0.5, 1.0])
REAL = [1.5, 0.7, 1.1, 0.5, 1.3]
K3 = sum(r - 1.0 - math.log(r) for r in REAL) / len(REAL)


def _run(eps_high):
    log_ratio = torch.tensor(RATIOS).log().requires_grad_(True)
    loss, metrics = clipped_surrogate(log_ratio, MASK, ADV, WEIGHTS, 0.2, eps_high)
    loss.backward()
    return loss.item(), log_ratio.grad, metrics


def test_clipped_below_and_above_for_both_signs():
    loss, grad, metrics = _run(0.2)
    # -(0.5 * (min(3, 2.4) + min(1.4, 1.6) + 2.2) + 1.0 * (min(-0.5, -0.8) + min(-1.3, -1.2)))
    assert loss == pytest.approx(-(0.5 * (2.4 + 1.4 + 2.2) + (-0.8 - 1.3)))
    # d/d log rho of -w·rho·A where the unclipped branch is active, 0 where the clip is
    want = [[0.0, -0.5 * 2 * 0.7, -0.5 * 2 * 1.1], [0.0, 1.3, 0.0]]
    assert grad.tolist() == [pytest.approx(row) for row in want]
    assert metrics["clip_fraction"] == pytest.approx(2 / 5)
    assert metrics["approx_kl"] == pytest.approx(K3, rel=1e-6)


def test_clip_higher_widens_only_the_upper_side():
    loss, grad, metrics = _run(0.6)
    # 1.5 < 1.6 now counts unclipped (3.0); the 0.5 with A < 0 stays clipped at 0.8
    assert loss == pytest.approx(-(0.5 * (3.0 + 1.4 + 2.2) + (-0.8 - 1.3)))
    assert grad[0, 0].item() == pytest.approx(-0.5 * 2 * 1.5)
    assert metrics["clip_fraction"] == pytest.approx(1 / 5)


def test_clip_range_reads_the_config():
    class Cfg:
        epsilon, epsilon_high = 0.1, None

    assert clip_range(Cfg) == (0.1, 0.1)
    Cfg.epsilon_high = 0.3
    assert clip_range(Cfg) == (0.1, 0.3)


def test_padded_rows_left_aligns_and_zero_pads():
    out = padded_rows([[1.0, 2.0], [3.0]], 3, "cpu")
    assert out.tolist() == [[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]]
