"""Several reward functions with reward_weights: the weighted sum against hand values, each
function's mean in the metrics, and clear errors for bad weights."""

import pytest

from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.rewards import RewardCaller
from comlrl.core.rewards.weighted import WeightedRewards

from .helpers import length_reward, make_trainer


def lengths(a, b):
    return [float(len(x)) for x in a]


def one(a, b, prompts=None):
    return [1.0] * len(a)


def test_weighted_sum_and_component_means():
    combined = WeightedRewards([lengths, one], [0.5, 2.0], num_agents=2)
    caller = RewardCaller(combined, num_agents=2)
    got = caller([["ab", "c"], ["d", "e"]], prompts=["p", "q"], batch_items=[{}, {}])
    assert got == [0.5 * 2 + 2.0, 0.5 * 1 + 2.0]
    assert combined.drain() == {"lengths": 1.5, "one": 1.0}
    assert combined.drain() == {}


def test_duplicate_names_are_numbered():
    assert WeightedRewards([one, one], num_agents=2).names == ["one_0", "one_1"]


@pytest.mark.parametrize("weights", [[1.0], [1.0, "x"], [1.0, float("nan")]])
def test_bad_weights_name_the_field(weights):
    with pytest.raises(ValueError, match="reward_weights"):
        WeightedRewards([lengths, one], weights, num_agents=2)


def test_config_refuses_a_bad_weight_list(tmp_path):
    with pytest.raises(ValueError, match="reward_weights"):
        make_trainer(tmp_path, reward_weights=[])


def test_trainer_sums_the_functions_and_logs_each(tmp_path):
    trainer = make_trainer(tmp_path, reward=[length_reward, one], reward_weights=[2.0, 0.5])
    trainer.train()
    recs = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "agent_0/loss" in r]
    assert recs
    for r in recs:
        assert r["rewards/one_mean"] == 1.0
        want = 2.0 * r["rewards/length_reward_mean"] + 0.5
        assert r["turn_1/reward_mean"] == pytest.approx(want)


def test_weight_count_must_match_the_functions(tmp_path):
    with pytest.raises(ValueError, match="reward_weights must be a list of 2 numbers"):
        make_trainer(tmp_path, reward=[length_reward, one], reward_weights=[1.0, 2.0, 3.0])
