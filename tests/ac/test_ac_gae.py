"""GAE(λ): the pure arithmetic against hand-derived numbers, and its config field."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.ac import IACConfig, MAACConfig
from comlrl.ac.targets import gae_advantages, lambda_returns, reward_to_go, td_target, tree_gae

# A 3-turn trajectory: r = (1, 0, 2), V_old(h_t) = (0.5, 1.0, 1.5), γ = 0.9.
# δ_0 = 1 + 0.9·1.0 - 0.5 = 1.4, δ_1 = 0 + 0.9·1.5 - 1.0 = 0.35, δ_2 = 2 - 1.5 = 0.5.
REWARDS = [1.0, 0.0, 2.0]
VALUES = [0.5, 1.0, 1.5]
GAMMA = 0.9


@pytest.mark.parametrize(
    "lam, advantages, targets",
    [
        # λ = 0: the TD errors and TD(0) targets r_t + γ·V(h_{t+1})
        (0.0, [1.4, 0.35, 0.5], [1.9, 1.35, 2.0]),
        # λ = 0.5 (γλ = 0.45): A_1 = 0.35 + 0.45·0.5, A_0 = 1.4 + 0.45·0.575
        (0.5, [1.65875, 0.575, 0.5], [2.15875, 1.575, 2.0]),
        # λ = 1: the returns G = (2.62, 1.8, 2) minus V
        (1.0, [2.12, 0.8, 0.5], [2.62, 1.8, 2.0]),
    ],
)
def test_three_turn_trajectory_by_hand(lam, advantages, targets):
    assert gae_advantages(REWARDS, VALUES, GAMMA, lam) == pytest.approx(advantages)
    assert lambda_returns(REWARDS, VALUES, GAMMA, lam) == pytest.approx(targets)


@pytest.mark.parametrize(
    "lam, advantages",
    [
        (0.0, [1.4, -1.0]),
        (0.5, [1.4 - 0.45, -1.0]),  # 0.95
        (1.0, [0.5, -1.0]),  # G = (1, 0) minus V = (0.5, 1.0)
    ],
)
def test_terminated_early_trajectory_has_no_bootstrap(lam, advantages):
    # The 3-turn episode ended after turn 2: turn 2's error is r - V, nothing after it.
    assert gae_advantages(REWARDS[:2], VALUES[:2], GAMMA, lam) == pytest.approx(advantages)


def test_lambda_zero_is_exactly_the_td_error():
    tds = [
        td_target(r, VALUES[t + 1] if t + 1 < 3 else None, GAMMA) - VALUES[t]
        for t, r in enumerate(REWARDS)
    ]
    assert gae_advantages(REWARDS, VALUES, GAMMA, 0.0) == tds


finite = st.floats(-10, 10, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=8), st.floats(0.0, 1.0))
def test_lambda_one_is_monte_carlo_return_minus_value(steps, gamma):
    rewards, values = (list(x) for x in zip(*steps))
    expected = [g - v for g, v in zip(reward_to_go(rewards, gamma), values)]
    got = gae_advantages(rewards, values, gamma, 1.0)
    assert got == pytest.approx(expected, abs=1e-9)


def test_tree_chain_equals_the_trajectory():
    deltas = [[1.4], [0.35], [0.5]]
    children = [[1], [2], [None]]
    for lam in (0.0, 0.5, 1.0):
        flat = [row[0] for row in tree_gae(deltas, children, GAMMA, lam)]
        assert flat == pytest.approx(gae_advantages(REWARDS, VALUES, GAMMA, lam))


def test_tree_single_turn_with_k_actions_keeps_the_td_errors():
    assert tree_gae([[0.3, -0.2, 1.0]], [[None, None, None]], GAMMA, 0.95) == [[0.3, -0.2, 1.0]]


def test_tree_continuation_is_the_mean_over_the_child_actions():
    # root action 0 leads to node 1 (actions with advantages 1 and 3), action 1 ends
    out = tree_gae([[0.5, 0.2], [1.0, 3.0]], [[1, None], [None, None]], 0.5, 0.5)
    assert out[0] == pytest.approx([0.5 + 0.25 * 2.0, 0.2])
    assert out[1] == [1.0, 3.0]


@pytest.mark.parametrize(
    "deltas, children, field",
    [
        ([[0.0]], [], "children must have one entry per node"),
        ([[0.0]], [[None, None]], r"children\[0\] must have one entry per joint action"),
        ([[0.0], [0.0]], [[0], [None]], r"children\[0\]\[0\] must index a later node"),
    ],
)
def test_tree_rejects_bad_shapes(deltas, children, field):
    with pytest.raises(ValueError, match=field):
        tree_gae(deltas, children, GAMMA, 0.5)


def test_trajectory_rejects_mismatched_values():
    with pytest.raises(ValueError, match="values must have one entry per reward"):
        gae_advantages([1.0, 2.0], [0.0], GAMMA, 0.5)


@pytest.mark.parametrize("cls", [IACConfig, MAACConfig])
def test_gae_lambda_field(cls):
    assert cls().gae_lambda == 0.0
    assert cls(gae_lambda=1).gae_lambda == 1
    assert cls(gae_lambda=0.95).gae_lambda == 0.95
    for bad in (-0.1, 1.5, float("nan"), True, "0.9"):
        with pytest.raises(ValueError, match="gae_lambda"):
            cls(gae_lambda=bad)
