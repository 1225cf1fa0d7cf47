"""Reward processor factories: arithmetic, argument checks and composition."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from comlrl.core.rewards import RewardProcessors

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


def test_identity():
    fn = RewardProcessors.identity()
    assert fn(-3.5) == -3.5
    assert fn(0.0) == 0.0


def test_clamp_defaults():
    fn = RewardProcessors.clamp()
    assert fn(-100.0) == -10.0
    assert fn(100.0) == 10.0
    assert fn(3.0) == 3.0


def test_clamp_custom_bounds_and_open_side():
    assert RewardProcessors.clamp(0.0, 1.0)(1.5) == 1.0
    assert RewardProcessors.clamp(0.0, 1.0)(-0.5) == 0.0
    assert RewardProcessors.clamp(min_val=0.0, max_val=math.inf)(1e300) == 1e300


def test_clamp_keeps_nan_visible():
    assert math.isnan(RewardProcessors.clamp(0.0, 1.0)(math.nan))


@pytest.mark.parametrize(
    ("lo", "hi"), [(1.0, 1.0), (2.0, 1.0), (math.nan, 1.0), (0.0, math.nan), ("0", 1.0)]
)
def test_clamp_rejects_bad_bounds(lo, hi):
    with pytest.raises(ValueError, match="min_val|max_val"):
        RewardProcessors.clamp(lo, hi)


def test_scale_and_shift():
    assert RewardProcessors.scale(2.5)(2.0) == 5.0
    assert RewardProcessors.scale()(7.0) == 7.0
    assert RewardProcessors.shift(-1.0)(2.0) == 1.0
    assert RewardProcessors.shift()(2.0) == 2.0


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, None, "2", True])
def test_scale_and_shift_reject_non_finite_or_non_numbers(bad):
    with pytest.raises(ValueError, match="factor"):
        RewardProcessors.scale(bad)
    with pytest.raises(ValueError, match="value"):
        RewardProcessors.shift(bad)


def test_sigmoid_scale_values():
    fn = RewardProcessors.sigmoid_scale()
    assert fn(0.0) == 0.5
    assert fn(2.0) == pytest.approx(1.0 / (1.0 + math.exp(-2.0)))
    assert fn(-2.0) == pytest.approx(1.0 / (1.0 + math.exp(2.0)))


@pytest.mark.parametrize("x", [-1e6, -1000.0, 1000.0, 1e6])
def test_sigmoid_scale_does_not_overflow(x):
    y = RewardProcessors.sigmoid_scale()(x)
    assert 0.0 <= y <= 1.0
    assert y == pytest.approx(0.0 if x < 0 else 1.0)


def test_normalize_by_length():
    assert RewardProcessors.normalize_by_length()(500.0) == 0.5
    assert RewardProcessors.normalize_by_length(max_len=4)(2.0) == 0.5


@pytest.mark.parametrize("bad", [0, -5, math.inf, math.nan, "10", None])
def test_normalize_by_length_rejects_bad_max_len(bad):
    with pytest.raises(ValueError, match="max_len"):
        RewardProcessors.normalize_by_length(bad)


def test_compose_applies_in_order():
    scale_then_shift = RewardProcessors.compose(
        RewardProcessors.scale(2.0), RewardProcessors.shift(1.0)
    )
    shift_then_scale = RewardProcessors.compose(
        RewardProcessors.shift(1.0), RewardProcessors.scale(2.0)
    )
    assert scale_then_shift(3.0) == 7.0
    assert shift_then_scale(3.0) == 8.0


def test_compose_of_nothing_is_identity():
    assert RewardProcessors.compose()(4.25) == 4.25


def test_compose_accepts_plain_callables():
    fn = RewardProcessors.compose(abs, lambda x: x + 1)
    assert fn(-2.0) == 3.0


def test_compose_rejects_non_callables():
    with pytest.raises(ValueError, match="compose argument 1"):
        RewardProcessors.compose(RewardProcessors.identity(), 3.0)


def test_processors_have_readable_names():
    assert RewardProcessors.clamp(-1, 1).__name__ == "clamp(-1.0, 1.0)"
    composed = RewardProcessors.compose(RewardProcessors.scale(2), RewardProcessors.shift(1))
    assert composed.__qualname__ == "compose(scale(2.0), shift(1.0))"


# --------------------------------------------------------------------------- hypothesis


@given(x=st.floats(allow_nan=False), lo=finite, hi=finite)
def test_clamp_output_always_within_bounds(x, lo, hi):
    assume(lo < hi)
    y = RewardProcessors.clamp(lo, hi)(x)
    assert lo <= y <= hi
    if lo <= x <= hi:
        assert y == x


@given(x=st.floats(allow_nan=False), y=st.floats(allow_nan=False))
def test_sigmoid_is_bounded_and_monotone(x, y):
    fn = RewardProcessors.sigmoid_scale()
    assert 0.0 <= fn(x) <= 1.0
    if x <= y:
        assert fn(x) <= fn(y)


@given(x=finite, a=finite, b=finite)
def test_compose_scale_shift_is_affine(x, a, b):
    fn = RewardProcessors.compose(RewardProcessors.scale(a), RewardProcessors.shift(b))
    assert fn(x) == x * a + b
