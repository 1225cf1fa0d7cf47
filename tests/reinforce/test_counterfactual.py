"""Counterfactual per-agent credit (``advantage_mode="counterfactual"``): hand-computed joint
tables, the tree's per-turn tables, the config refusal in aligned mode and a training run."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.core.algos import JointTable
from comlrl.core.loop import ItemBatch
from comlrl.core.rollout.formatters import build_formatters
from comlrl.core.rollout.generation import PromptSamples
from comlrl.core.rollout.record import RolloutGroup, rollout_groups
from comlrl.core.rollout.tree import TreeSettings, build_trees, joint_action_indices
from comlrl.reinforce import MAGRPOConfig
from comlrl.reinforce.algos import estimate, normalize_groups
from comlrl.reinforce.magrpo import joint_table

from .helpers import PROMPTS, make_trainer


def _table(returns, index):
    return JointTable(
        torch.tensor([returns], dtype=torch.float64), torch.tensor([index], dtype=torch.long)
    )


def _counterfactual(returns, index, k, normalize=False):
    table = _table(returns, index)
    adv = estimate(torch.zeros(1, k, dtype=torch.float64), "counterfactual", None, table=table)
    return (normalize_groups(adv, "counterfactual", table) if normalize else adv)[0].tolist()


# 2x2: joint actions (k0, k1) in product order (0,0), (0,1), (1,0), (1,1); node mean 3.
R22 = [1.0, 3.0, 2.0, 6.0]


def test_two_by_two_table_by_hand():
    # agent 0 holds k0 fixed: mean(1, 3) = 2, mean(2, 6) = 4; minus 3
    assert _counterfactual(R22, [0, 0, 1, 1], 2) == pytest.approx([-1.0, 1.0])
    # agent 1 holds k1 fixed: mean(1, 2) = 1.5, mean(3, 6) = 4.5; minus 3
    assert _counterfactual(R22, [0, 1, 0, 1], 2) == pytest.approx([-1.5, 1.5])


def test_two_by_two_normalized_by_the_node_spread():
    # deviations from 3: -2, 0, -1, 3 -> variance 14 / 4; both agents share that one scale
    s = math.sqrt(3.5)
    assert _counterfactual(R22, [0, 0, 1, 1], 2, True) == pytest.approx([-1 / s, 1 / s])
    assert _counterfactual(R22, [0, 1, 0, 1], 2, True) == pytest.approx([-1.5 / s, 1.5 / s])


# 3x2: agent 0 has three samples, agent 1 two; (k0, k1) in product order; node mean 18 / 6 = 3.
R32 = [0.0, 1.0, 2.0, 2.0, 4.0, 9.0]


def test_three_by_two_table_by_hand():
    # agent 0: mean(0, 1) = 0.5, mean(2, 2) = 2, mean(4, 9) = 6.5; minus 3
    assert _counterfactual(R32, [0, 0, 1, 1, 2, 2], 3) == pytest.approx([-2.5, -1.0, 3.5])
    # agent 1: mean(0, 2, 4) = 2, mean(1, 2, 9) = 4; minus 3
    assert _counterfactual(R32, [0, 1, 0, 1, 0, 1], 2) == pytest.approx([-1.0, 1.0])
    # deviations -3, -2, -1, -1, 1, 6: variance 52 / 6
    s = math.sqrt(52 / 6)
    got = _counterfactual(R32, [0, 1, 0, 1, 0, 1], 2, True)
    assert got == pytest.approx([-1 / s, 1 / s])


def test_an_agent_whose_answer_does_not_matter_gets_zero():
    # the reward reads agent 0's sample only: R(k0, k1) = 5 * k0
    table = [0.0, 0.0, 5.0, 5.0]
    assert _counterfactual(table, [0, 1, 0, 1], 2, True) == [0.0, 0.0]
    assert _counterfactual(table, [0, 0, 1, 1], 2, True) == pytest.approx([-1.0, 1.0])


def test_a_minor_agent_keeps_a_minor_share_where_the_group_mean_scales_it_up():
    # R(k0, k1) = 1 + 2 * k0 + 0.02 * k1: agent 0 moves the reward by 2, agent 1 by 0.02
    table = [1.0, 1.02, 3.0, 3.02]
    minor = _counterfactual(table, [0, 1, 0, 1], 2, True)
    major = _counterfactual(table, [0, 0, 1, 1], 2, True)
    s = math.sqrt((1.01**2 + 0.99**2 + 0.99**2 + 1.01**2) / 4)
    assert major == pytest.approx([-1 / s, 1 / s])
    assert minor == pytest.approx([-0.01 / s, 0.01 / s])
    # unnormalized, counterfactual credit is the group-mean baseline over the cross table's
    # marginal returns; normalized per group, that baseline gives the minor agent +-1 as well
    marginal = torch.tensor([[1.01, 3.01], [2.0, 2.02]], dtype=torch.float64)
    grouped = normalize_groups(estimate(marginal, "mean"), "mean").tolist()
    assert grouped == [pytest.approx([-1.0, 1.0]), pytest.approx([-1.0, 1.0])]
    assert _counterfactual(table, [0, 1, 0, 1], 2) == pytest.approx(
        estimate(marginal, "mean")[1].tolist()
    )


def test_the_table_is_required_and_must_cover_every_completion():
    with pytest.raises(ValueError, match="joint_mode='cross'"):
        estimate(torch.zeros(1, 2, dtype=torch.float64), "counterfactual")
    with pytest.raises(ValueError, match="no joint action"):
        _counterfactual([1.0, 2.0], [0, 0], 2)
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        _counterfactual([1.0, 2.0], [0, 2], 2)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 3),
    k=st.integers(2, 3),
    data=st.data(),
)
def test_cross_table_invariants(n, k, data):
    actions = joint_action_indices(n, k, "cross")
    joint = data.draw(
        st.lists(st.floats(-10, 10, allow_nan=False), min_size=len(actions), max_size=len(actions))
    )
    spread = torch.tensor(joint, dtype=torch.float64).std(unbiased=False)
    total = 0.0
    for agent in range(n):
        index = [a[agent] for a in actions]
        adv = _counterfactual(joint, index, k, normalize=True)
        # every agent's credit sums to zero and stays within sqrt(K) after normalization
        assert sum(adv) == pytest.approx(0.0, abs=1e-9)
        assert all(abs(x) <= math.sqrt(k) + 1e-9 for x in adv)
        total += sum(x * x for x in adv) / k
    # the agents' main effects share the table's variance: their mean squares add up to at
    # most 1 in units of the node's spread (0 when the table ties)
    assert total <= 1.0 + 1e-9 or spread < 1e-6


# ---------------------------------------------------------------- the tree's tables
class IndexGenerator:
    """Agent i's sample j at every node is the text ``"i:j"``."""

    def __init__(self, k):
        self.k = k

    def __call__(self, prompts_per_agent):
        return [
            [
                PromptSamples(
                    p, [1], [[2, j] for j in range(self.k)], [f"{i}:{j}" for j in range(self.k)]
                )
                for p in prompts
            ]
            for i, prompts in enumerate(prompts_per_agent)
        ]


def _sample(text):
    return int(text.split(":")[1])


def two_turn_reward(completions, prompts, batch_items):
    """Turn 1: the 2x2 table R22. Turn 2 (the prompt names the parent's agent-1 sample p1):
    ``10 * k0 + 2 * p1``, so only agent 0 matters there, and the turn-1 return of agent 1's
    sample carries the later turn's bonus."""
    out = []
    for c0, c1, prompt in zip(completions[0], completions[1], prompts):
        k0, k1 = _sample(c0), _sample(c1)
        if "after" in prompt:
            out.append(10.0 * k0 + 2.0 * int(prompt.rsplit(" ", 1)[1]))
        else:
            out.append(R22[2 * k0 + k1])
    return out


def after_transition(
    *, prompt, agent_completions, num_agents, prompt_history_per_agent, response_history_per_agent
):
    return [f"{prompt} after {_sample(agent_completions[1])}"] * num_agents


def _tree(turns):
    settings_ = TreeSettings(num_agents=2, num_turns=turns, num_samples=2, joint_mode="cross")
    roots = build_trees(
        [{"prompt": "p"}],
        settings_,
        build_formatters(None, 2),
        IndexGenerator(2),
        two_turn_reward,
        after_transition,
    )
    return list(roots[0].walk())


def _advantages(groups, normalize):
    table = joint_table(groups)
    returns = torch.tensor([g.returns for g in groups], dtype=torch.float64)
    adv = estimate(returns, "counterfactual", None, table=table)
    return (normalize_groups(adv, "counterfactual", table) if normalize else adv).tolist()


def test_the_record_carries_each_nodes_joint_table():
    (root,) = _tree(1)
    g0, g1 = rollout_groups([root], 0)[0], rollout_groups([root], 1)[0]
    assert g0.joint_returns == R22 and g1.joint_returns == R22
    assert g0.joint_index == [0, 0, 1, 1] and g1.joint_index == [0, 1, 0, 1]
    assert _advantages([g0], False) == [pytest.approx([-1.0, 1.0])]
    assert _advantages([g1], False) == [pytest.approx([-1.5, 1.5])]


def test_each_turn_uses_its_own_nodes_table():
    nodes = _tree(2)
    root, children = nodes[0], nodes[1:]
    assert len(children) == 4
    # turn 2: R = 10 * k0 + 2 * p1; agent 0 gets -5 / +5, agent 1 nothing, at every child
    for agent, want in ((0, [-1.0, 1.0]), (1, [0.0, 0.0])):
        groups = rollout_groups(children, agent)
        for row in _advantages(groups, True):
            assert row == pytest.approx(want)
    # turn 1: returns R22 + mean(child) = R22 + 5 + 2 * k1 (discount 1): agent 1's later bonus
    # of 0 or 2 adds -1 / +1 to its credit; agent 0's stays at -1 / +1
    g0, g1 = rollout_groups([root], 0), rollout_groups([root], 1)
    assert g0[0].joint_returns == pytest.approx([6.0, 10.0, 7.0, 13.0])
    assert _advantages(g0, False) == [pytest.approx([-1.0, 1.0])]
    assert _advantages(g1, False) == [pytest.approx([-2.5, 2.5])]


def test_an_older_buffer_without_tables_gets_a_clear_error():
    old = RolloutGroup(
        agent=0, turn=0, step=1, prompt_ids=[1], completion_ids=[[2], [3]], returns=[0.0, 1.0]
    )
    with pytest.raises(ValueError, match="joint table"):
        joint_table([old])


# ---------------------------------------------------------------- config and trainer
def test_aligned_mode_is_refused_at_config_time():
    with pytest.raises(ValueError, match="set joint_mode='cross'") as err:
        MAGRPOConfig(advantage_mode="counterfactual")
    assert "\n" not in str(err.value)
    assert MAGRPOConfig(advantage_mode="counterfactual", joint_mode="crossed").joint_mode == "cross"


def first_agent_length(completions1, completions2):
    """Only agent 0's answer decides the reward."""
    return [float(len(a)) for a in completions1]


def test_magrpo_credits_only_the_agent_whose_answer_decides(tmp_path):
    trainer = make_trainer(
        tmp_path,
        reward=first_agent_length,
        joint_mode="cross",
        advantage_mode="counterfactual",
        num_generations=3,
    )
    batch = trainer.collect(ItemBatch(0, 2, items=list(PROMPTS[:2]), offset=0))
    decisive = []
    for rec in batch.entries:
        g0, g1 = rec.samples[0][0], rec.samples[1][0]
        assert len(g0.joint_index) == 9
        assert g1.advantages == pytest.approx([0.0, 0.0, 0.0], abs=1e-12)
        decisive.extend(g0.advantages)
        # agent 0's normalized credit is its z-score: the table only varies along agent 0
        if max(g0.returns) > min(g0.returns):
            assert sum(x * x for x in g0.advantages) / 3 == pytest.approx(1.0)
    assert any(x != 0.0 for x in decisive)
    trainer.train()
