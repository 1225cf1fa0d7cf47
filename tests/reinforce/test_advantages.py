"""Advantages for every mode, with and without normalization, against hand-computed values."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from comlrl.reinforce.algos import batch_normalize

from .helpers import advantages_of

R = [1.0, 2.0, 4.0, 5.0]  # mean 3, max 5, population std sqrt(2.5)
STD = math.sqrt(2.5)


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("mean", [-2.0, -1.0, 1.0, 2.0]),
        ("raw", [1.0, 2.0, 4.0, 5.0]),
        ("max", [-4.0, -3.0, -1.0, 0.0]),
        # (K*R - sum) / (K-1) with K=4, sum=12
        ("rloo", [(4 - 12) / 3, (8 - 12) / 3, (16 - 12) / 3, (20 - 12) / 3]),
    ],
)
def test_unnormalized(mode, expected):
    assert advantages_of(R, mode, normalize=False).tolist() == pytest.approx(expected)


MAX_RMS = math.sqrt((16 + 9 + 1 + 0) / 4)  # sqrt(mean (R - 5)^2)


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("mean", [-2 / STD, -1 / STD, 1 / STD, 2 / STD]),
        # raw returns are z-scored (centred first): the mean baseline's values
        ("raw", [-2 / STD, -1 / STD, 1 / STD, 2 / STD]),
        ("max", [-4 / MAX_RMS, -3 / MAX_RMS, -1 / MAX_RMS, 0.0]),
        # the rms of K/(K-1)·(R - mean) is K/(K-1)·std: the same as the mean baseline
        ("rloo", [-2 / STD, -1 / STD, 1 / STD, 2 / STD]),
    ],
)
def test_normalized_keeps_each_baseline(mode, expected):
    assert advantages_of(R, mode, normalize=True).tolist() == pytest.approx(expected)


def test_normalized_modes_differ_where_their_shapes_do():
    outs = {m: tuple(advantages_of(R, m, True).tolist()) for m in ("mean", "max")}
    assert len(set(outs.values())) == 2


def test_equal_returns_give_zero_centered_advantages():
    assert advantages_of([2.0, 2.0, 2.0], "mean", True).tolist() == [0.0, 0.0, 0.0]


def test_unknown_mode():
    with pytest.raises(ValueError, match="advantage_mode"):
        advantages_of(R, "median", False)


def test_batch_normalize_is_zscore():
    out = batch_normalize([torch.tensor([1.0, 2.0, 3.0, 6.0], dtype=torch.float64)])[0]
    assert out.mean().item() == pytest.approx(0.0, abs=1e-12)
    assert out.std(unbiased=False).item() == pytest.approx(1.0)


@given(st.lists(st.floats(-100, 100), min_size=2, max_size=16))
def test_mean_mode_sums_to_zero(returns):
    adv = advantages_of(returns, "mean", normalize=True)
    assert abs(adv.sum().item()) < 1e-6


@given(st.lists(st.floats(-100, 100), min_size=2, max_size=16))
def test_max_mode_never_positive(returns):
    assert (advantages_of(returns, "max", normalize=True) <= 1e-12).all()


@given(st.lists(st.floats(-100, 100), min_size=2, max_size=16))
def test_rloo_is_scaled_mean(returns):
    k = len(returns)
    rloo = advantages_of(returns, "rloo", normalize=False)
    mean = advantages_of(returns, "mean", normalize=False)
    assert torch.allclose(rloo, mean * k / (k - 1), atol=1e-9)


def test_estimators_take_many_groups_at_once():
    from comlrl.reinforce.algos import estimate

    groups = torch.tensor([R, [3.0, 1.0, 2.0, 2.0]], dtype=torch.float64)
    for mode in ("mean", "raw", "max", "rloo"):
        got = estimate(groups, mode)
        for row, returns in zip(got, groups):
            want = advantages_of(returns.tolist(), mode, normalize=False)
            assert row.tolist() == pytest.approx(want.tolist())


def test_the_greedy_baseline_goes_through_the_contract():
    from comlrl.reinforce.algos import estimate

    groups = torch.tensor([[1.0, 2.0], [4.0, 0.0]], dtype=torch.float64)
    got = estimate(groups, "greedy", baseline=torch.tensor([1.5, 1.0], dtype=torch.float64))
    assert got.tolist() == [[-0.5, 0.5], [3.0, -1.0]]
    with pytest.raises(ValueError, match="baseline"):
        estimate(groups, "greedy")


def test_a_registered_estimator_gets_every_group_and_the_keywords():
    from comlrl.core import algos
    from comlrl.reinforce.algos import estimate

    seen = {}

    @algos.register_advantage("test_median_baseline")
    def median(r, config=None, *, baseline=None, table=None):
        seen.update(shape=tuple(r.shape), baseline=baseline, table=table)
        return r - r.median(-1, keepdim=True).values

    groups = torch.tensor([[1.0, 2.0, 9.0], [0.0, 5.0, 6.0]], dtype=torch.float64)
    assert estimate(groups, "test_median_baseline").tolist() == [
        [-1.0, 0.0, 7.0],
        [-5.0, 0.0, 1.0],
    ]
    assert seen == {"shape": (2, 3), "baseline": None, "table": None}
