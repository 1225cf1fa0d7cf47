"""Core's per-turn update metrics: one definition of the keys, taken over what a family says."""

from types import SimpleNamespace

import pytest

from comlrl.core.rewards.reward_metrics import turn_metrics
from comlrl.core.rollout.record import RolloutGroup

CONFIG = SimpleNamespace(reference_kl_enabled=True, reference_kl_coef=0.5)


def _group(agent, turn, returns, kls, node_reward, node_return):
    return RolloutGroup(
        agent,
        turn,
        0,
        [1],
        [[2]] * len(returns),
        list(returns),
        kls=list(kls),
        node_reward=node_reward,
        node_return=node_return,
    )


SAMPLES = [
    [_group(0, 0, [1.0, 3.0], [0.2, 0.4], 1.5, 2.0), _group(0, 1, [5.0, 5.0], [], 4.0, 5.0)],
    [_group(1, 0, [7.0, 9.0], [0.6, 0.8], 1.5, 2.0), _group(1, 1, [6.0, 8.0], [], 4.0, 5.0)],
]


def test_first_agent_takes_its_nodes_unshaped_returns_and_its_kl():
    got = turn_metrics(SAMPLES, "first_agent", CONFIG)
    assert got == pytest.approx(
        {
            "turn_1/reward_mean": 1.5,
            "turn_1/expected_return": 2.0,
            "turn_1/reference_kl_mean": 0.3,
            "turn_1/reference_kl_penalty_mean": 0.15,
            "turn_2/reward_mean": 4.0,
            "turn_2/expected_return": 5.0,
        }
    )


def test_all_agents_takes_every_shaped_return_and_kl():
    got = turn_metrics(SAMPLES, "all_agents", CONFIG)
    assert got["turn_1/reward_mean"] == pytest.approx(1.5)
    assert got["turn_1/expected_return"] == pytest.approx(5.0)  # (1 + 3 + 7 + 9) / 4
    assert got["turn_1/reference_kl_mean"] == pytest.approx(0.5)
    assert got["turn_2/expected_return"] == pytest.approx(6.0)
    assert "turn_2/reference_kl_mean" not in got  # nothing was shaped at turn 2


def test_no_keys_without_a_record_or_a_declaration_and_a_clear_error_for_a_wrong_one():
    assert turn_metrics(SAMPLES, None, CONFIG) == {}
    assert turn_metrics([["a preference pair"]], "first_agent", CONFIG) == {}
    off = SimpleNamespace(reference_kl_enabled=False, reference_kl_coef=0.5)
    assert "turn_1/reference_kl_mean" not in turn_metrics(SAMPLES, "first_agent", off)
    with pytest.raises(ValueError, match="turn_metrics_over must be one of"):
        turn_metrics(SAMPLES, "everyone", CONFIG)
