"""The rollout record: built from the tree's shaped returns, checkpointed, and read from the
older ``NodeSample`` layout of buffers saved before it moved into core."""

from types import SimpleNamespace

import pytest

from comlrl.core.rewards.shaping import shape_with_kl
from comlrl.core.rollout.record import GroupCodec, RolloutGroup, rollout_groups
from comlrl.core.rollout.tree import TreeNode, compute_returns


def _leaf():
    node = TreeNode(0, {}, 0, ["p", "q"], ["p", "q"], [[], []], [[], []])
    node.joint_actions = [(0, 0), (0, 1), (1, 0), (1, 1)]  # cross mode, K = 2
    node.rewards = [1.0, 2.0, 3.0, 4.0]
    node.samples = [SimpleNamespace(prompt_ids=[7], completion_ids=[[1], [2]]) for _ in range(2)]
    node.env_step = 4
    return node


def test_groups_carry_the_shaped_credit_and_the_environment_values():
    node = _leaf()
    compute_returns(node, 1.0)
    shape_with_kl([node], [node], [[[0.5, 1.0]], [[0.0, 0.0]]], 2.0, 1.0)
    g0, g1 = rollout_groups([node], 0, [[0.5, 1.0]])[0], rollout_groups([node], 1)[0]
    # agent 0's completion 0 is in actions 0, 1 (rewards 1, 2), completion 1 in 2, 3
    assert g0.returns == [1.5 - 2 * 0.5, 3.5 - 2 * 1.0]
    assert g0.rewards == g0.returns  # one turn: the return is the reward
    assert g1.returns == [2.0, 3.0]  # completion 0 in actions 0, 2; 1 in 1, 3
    assert g0.kls == [0.5, 1.0] and g1.kls == []
    assert (g0.node_reward, g0.node_return, g0.step, g0.turn) == (2.5, 2.5, 4, 0)


def test_a_group_round_trips_through_its_state():
    g = RolloutGroup(0, 1, 5, [1], [[2], [3]], [0.5, 1.0], advantages=[-0.5, 0.5], baseline=0.2)
    assert GroupCodec().from_state(GroupCodec().to_state(g)) == g


def test_a_buffer_of_the_older_layout_is_read_with_its_kl_shaped():
    old = {
        "agent_idx": 1,
        "turn_idx": 0,
        "prompt_ids": [1],
        "completion_ids": [[2], [3]],
        "returns": [1.0, 2.0],
        "node_mean_reward": 1.5,
        "node_mean_return": 1.5,
        "node_env_step": 9,
        "reference_kls": [0.1, 0.2],
        "carried_kls": [0.3, 0.4],
        "reference_logps": [],
        "old_logps": [],
        "baseline": None,
        "agent_reward_mean": None,
    }
    g = GroupCodec(kl_coef=0.5).from_state(old)
    assert (g.agent, g.turn, g.step, g.node_reward) == (1, 0, 9, 1.5)
    assert g.returns == pytest.approx([1.0 - 0.15, 2.0 - 0.2])  # less coef x carried KL
    assert g.kls == [0.1, 0.2] and g.advantages == []  # the update computes them
    assert GroupCodec().from_state(old).returns == [1.0, 2.0]  # KL not in the reward
