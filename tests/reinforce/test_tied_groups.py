"""Tied and near-tied groups in every advantage mode, with and without normalization, in group
and batch scope: hand-derived values, and never the ``R / 1e-6`` blow-up of a floored std."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from comlrl.core.logging.jsonl import read_metrics
from comlrl.reinforce.algos import batch_normalize

from .helpers import advantages_of, make_trainer

TIED = [2.0, 2.0, 2.0, 2.0]
D = 1e-4
NEAR = [1.0, 1.0, 1.0, 1.0 + D]
S3 = math.sqrt(3.0)

# mode -> (tied unnormalized, tied normalized)
TIED_EXPECTED = {
    "mean": ([0.0] * 4, [0.0] * 4),
    "raw": ([2.0] * 4, [0.0] * 4),  # normalized raw returns are z-scored: a tie gives 0
    "max": ([0.0] * 4, [0.0] * 4),
    "rloo": ([0.0] * 4, [0.0] * 4),
}


@pytest.mark.parametrize("mode", sorted(TIED_EXPECTED))
@pytest.mark.parametrize("normalize", [False, True])
def test_tied_group(mode, normalize):
    want = TIED_EXPECTED[mode][int(normalize)]
    got = advantages_of(TIED, mode, normalize).tolist()
    assert got == pytest.approx(want, abs=1e-9)


def _near_expected(mode, normalize):
    if not normalize:
        base = {
            "mean": [-D / 4] * 3 + [3 * D / 4],
            "raw": NEAR,
            "max": [-D] * 3 + [0.0],
            "rloo": [-D / 3] * 3 + [D],  # R_k minus the mean of the other three
        }
        return base[mode]
    return {
        # std = D·sqrt(3)/4: the usual GRPO z-scores, bounded by sqrt(K)
        "mean": [-1 / S3] * 3 + [S3],
        "rloo": [-1 / S3] * 3 + [S3],
        # normalized raw returns are z-scored, as the mean baseline's
        "raw": [-1 / S3] * 3 + [S3],
        # rms of (R - max) = D·sqrt(3)/2
        "max": [-2 / S3] * 3 + [0.0],
    }[mode]


@pytest.mark.parametrize("mode", sorted(TIED_EXPECTED))
@pytest.mark.parametrize("normalize", [False, True])
def test_near_tied_group(mode, normalize):
    got = advantages_of(NEAR, mode, normalize).tolist()
    assert got == pytest.approx(_near_expected(mode, normalize), rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("mode", sorted(TIED_EXPECTED))
def test_batch_scope_tied_and_near_tied(mode):
    # Batch scope z-scores the baseline advantages of the whole batch.
    tied = batch_normalize([advantages_of(TIED + TIED, mode, normalize=False)])[0]
    assert tied.abs().max().item() < 1e-6
    near = batch_normalize([advantages_of(NEAR, mode, normalize=False)])[0]
    assert near.tolist() == pytest.approx([-1 / S3] * 3 + [S3], rel=1e-5)


@given(
    st.lists(st.floats(-100, 100), min_size=2, max_size=16),
    st.sampled_from(sorted(TIED_EXPECTED)),
)
def test_normalized_advantages_are_bounded_by_sqrt_k(returns, mode):
    adv = advantages_of(returns, mode, normalize=True)
    assert adv.abs().max().item() <= math.sqrt(len(returns)) + 1e-9


def test_mareinforce_with_a_constant_reward_keeps_a_small_loss(tmp_path):
    # Every group ties at 1.0: the old floored std made each advantage 1e6 and the loss ~1e7.
    trainer = make_trainer(
        tmp_path,
        reward=lambda a, b: [1.0] * len(a),
        advantage_mode="raw",
        advantage_normalization=True,
    )
    trainer.train()
    recs = read_metrics(tmp_path / "run" / "metrics.jsonl")
    losses = [r[f"agent_{i}/loss"] for r in recs for i in (0, 1) if f"agent_{i}/loss" in r]
    # tied groups give advantages of 0, so the loss is 0, not 1e6 times a few log-probs
    assert losses and all(v == 0.0 for v in losses)


@pytest.mark.parametrize("value", [0.01, 1.0, -3.0])
def test_a_tied_raw_group_gives_no_signal_whatever_its_reward(value):
    assert advantages_of([value] * 4, "raw", True).tolist() == [0.0] * 4
