"""The rollout record: built from the tree's shaped returns, and checkpointed."""

from types import SimpleNamespace

from comlrl.core.rewards.shaping import shape_with_kl
from comlrl.core.rollout.record import RolloutGroup, ValueGroup, rollout_groups
from comlrl.core.rollout.tree import TreeNode, compute_returns


def _leaf():
    node = TreeNode(0, {}, 0, ["p", "q"], ["p", "q"], [[], []], [[], []])
    node.joint_actions = [(0, 0), (0, 1), (1, 0), (1, 1)]  # cross mode, K = 2
    node.rewards = [1.0, 2.0, 3.0, 4.0]
    node.samples = [SimpleNamespace(prompt_ids=[7], completion_ids=[[1], [2]]) for _ in range(2)]
    node.step = 4
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
    assert RolloutGroup.from_state(g.to_state()) == g
    v = ValueGroup(1, 0, 2, [1], [[2]], [1.0], advantages=[0.3], values=[0.7], targets=[1.0])
    assert ValueGroup.from_state(RolloutGroup.to_state(v)) == v
