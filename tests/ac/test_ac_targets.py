"""TD(0) targets and advantages: the pure arithmetic, and the trainers on a fixed 2-turn
trajectory whose rewards and critic values are scripted so the results can be computed by hand."""

import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.ac.targets import (
    explained_variance,
    normalize_advantages,
    reward_to_go,
    td_target,
    value_error,
)
from comlrl.core.loop import ItemBatch, run_unit
from comlrl.core.rollout.record import ValueGroup
from comlrl.core.training.policy_update import minibatches

from .helpers import flat, make_iac, make_maac

finite = st.floats(-100, 100, allow_nan=False)


def scripted_reward(values):
    """A reward that returns the next scripted value on each call (one joint action per call)."""
    queue = list(values)

    def reward(a, b):
        return [queue.pop(0) for _ in a]

    return reward


def test_td_target_and_reward_to_go_by_hand():
    assert td_target(0.5, 0.7, 0.9) == pytest.approx(1.13)
    assert td_target(0.5, None, 0.9) == 0.5
    assert reward_to_go([0.5, 1.0, 2.0], 0.5) == pytest.approx([0.5 + 0.5 * 2.0, 2.0, 2.0])


@settings(max_examples=50, deadline=None)
@given(st.lists(finite, min_size=2, max_size=30))
def test_normalized_advantages_are_z_scores(advs):
    out = normalize_advantages(advs)
    t = torch.tensor(advs, dtype=torch.float64)
    if t.std(unbiased=False) > 1e-3:
        assert sum(out) / len(out) == pytest.approx(0.0, abs=1e-6)
        var = sum(x * x for x in out) / len(out)
        assert var == pytest.approx(1.0, rel=1e-6)
    # order is kept: a larger advantage stays larger
    for i in range(len(advs) - 1):
        if advs[i] > advs[i + 1]:
            assert out[i] >= out[i + 1]


@given(finite)
def test_single_advantage_is_left_alone(a):
    assert normalize_advantages([a]) == [a]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(finite, finite, finite), min_size=1, max_size=20), st.floats(0.01, 5))
def test_clipped_value_error_is_pessimistic(rows, clip):
    v, t, o = (torch.tensor(x, dtype=torch.float64) for x in zip(*rows))
    plain = value_error(v, t, o, None)
    clipped = value_error(v, t, o, clip)
    assert torch.all(clipped >= plain - 1e-9)
    inside = (v - o).abs() <= clip
    assert torch.allclose(clipped[inside], plain[inside])


def test_explained_variance():
    assert explained_variance([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert explained_variance([2.0, 2.0, 2.0], [1.0, 2.0, 3.0]) == pytest.approx(0.0)
    assert math.isnan(explained_variance([1.0, 2.0], [1.0, 1.0]))


# ---------------------------------------------------------------- the fixed 2-turn trajectory
GAMMA = 0.9
REWARDS = [0.5, 1.0]  # turn 1, turn 2 (one item, one joint action per turn)
V_IAC = {0: [0.3, 0.7], 1: [0.2, 0.4]}  # agent -> V_old(h_1), V_old(h_2)


def _iac(tmp_path, **cfg):
    trainer = make_iac(
        tmp_path,
        reward=scripted_reward(REWARDS),
        dataset=[{"prompt": "Write a story about a cat."}],
        num_turns=2,
        num_generations=1,
        discount=GAMMA,
        rollout_buffer_size=64,
        **cfg,
    )
    rows_seen = []

    def values_of(agent, rows):
        rows_seen.append((agent, [list(r) for r in rows]))
        return V_IAC[agent][: len(rows)]

    trainer.values_of = values_of
    return trainer, rows_seen


def _two_turns(groups):
    """The one-completion groups of a one-item, two-turn rollout, checked to be turns 1 and 2."""
    first, second = groups
    assert (first.turn, second.turn) == (0, 1) and first.size == second.size == 1
    return first, second


@pytest.mark.parametrize("separate", [True, False])
def test_iac_targets_on_a_fixed_trajectory(tmp_path, separate):
    trainer, rows_seen = _iac(tmp_path, separate=separate)
    run_unit(trainer, ItemBatch(0, 1, [trainer.train_dataset[0]]))
    for agent, expected_v in V_IAC.items():
        first, second = _two_turns(trainer.rollout_buffer.samples[agent])
        # V critic: one row per prompt (the history), never per sample
        rows = dict(rows_seen)[agent]
        assert rows == [first.prompt_ids, second.prompt_ids]
        assert first.values == [expected_v[0]] and second.values == [expected_v[1]]
        assert first.targets == pytest.approx([REWARDS[0] + GAMMA * expected_v[1]])
        assert second.targets == pytest.approx([REWARDS[1]])
        assert first.advantages == pytest.approx(
            [REWARDS[0] + GAMMA * expected_v[1] - expected_v[0]]
        )
        assert second.advantages == pytest.approx([REWARDS[1] - expected_v[1]])
        # returns are logged undiscounted (expected_return, as in 1.4.3); targets discount
        assert first.returns == pytest.approx([REWARDS[0] + REWARDS[1]])
        assert second.returns == pytest.approx([REWARDS[1]])
    # agent 0 by hand: 0.5 + 0.9*0.7 = 1.13, A = 0.83; turn 2: 1.0, A = 0.3
    a0 = trainer.rollout_buffer.samples[0]
    assert flat(a0, "targets") == pytest.approx([1.13, 1.0])
    assert flat(a0, "advantages") == pytest.approx([0.83, 0.3])


def test_the_callback_sees_the_critic_fields(tmp_path):
    seen = []
    trainer, _ = _iac(tmp_path)
    trainer.metrics_callback = lambda samples: seen.extend(samples) or {}
    run_unit(trainer, ItemBatch(0, 1, [trainer.train_dataset[0]]))
    assert [(s.agent_idx, s.turn_idx) for s in seen] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for s, g in zip(seen, [g for b in trainer.rollout_buffer.samples for g in b]):
        assert (s.prompt_ids, [s.completion_ids]) == (g.prompt_ids, g.completion_ids)
        assert (s.old_value, s.value_target, s.advantage) == (
            g.values[0],
            g.targets[0],
            g.advantages[0],
        )
        assert s.metadata["value_target"] == s.value_target and s.returns == g.returns[0]
        assert s.reward == REWARDS[s.turn_idx] and s.reference_kl is None


def test_iac_q_critic_reads_history_and_action(tmp_path):
    trainer, rows_seen = _iac(tmp_path, critic_type="q")
    run_unit(trainer, ItemBatch(0, 1, [trainer.train_dataset[0]]))
    first, second = _two_turns(trainer.rollout_buffer.samples[0])
    assert dict(rows_seen)[0] == [
        first.prompt_ids + first.completion_ids[0],
        second.prompt_ids + second.completion_ids[0],
    ]
    assert first.targets == pytest.approx([0.5 + GAMMA * 0.7])


def test_early_termination_ends_the_bootstrap(tmp_path):
    trainer, _ = _iac(tmp_path, early_termination_threshold=0.4)
    run_unit(trainer, ItemBatch(0, 1, [trainer.train_dataset[0]]))
    (only,) = trainer.rollout_buffer.samples[0]
    assert only.targets == pytest.approx([0.5])
    assert only.advantages == pytest.approx([0.5 - 0.3])


def test_reference_kl_shapes_the_targets(tmp_path, monkeypatch):
    import comlrl.core.rewards.shaping as shaping

    monkeypatch.setattr(shaping, "sequence_kl", lambda policy, ref, p, c, pad, **_: [2.0] * len(p))
    trainer, _ = _iac(tmp_path, reference_kl_enabled=True, reference_kl_coef=0.1)
    seen = []
    trainer.metrics_callback = lambda samples: seen.extend(samples) or {}
    run_unit(trainer, ItemBatch(0, 1, [trainer.train_dataset[0]]))
    first, second = _two_turns(trainer.rollout_buffer.samples[0])
    assert first.rewards == pytest.approx([0.5 - 0.2]) and first.kls == [2.0]
    assert first.targets == pytest.approx([0.5 - 0.2 + GAMMA * 0.7])
    assert second.targets == pytest.approx([1.0 - 0.2])
    assert first.returns == pytest.approx([0.3 + 0.8])  # undiscounted, as logged
    view = seen[0]
    assert view.reward == 0.5 and view.reference_kl == 2.0
    assert view.shaped_reward == pytest.approx(0.3)
    assert view.metadata["reference_kl_penalty"] == pytest.approx(0.2)


def test_maac_targets_on_a_fixed_trajectory(tmp_path, monkeypatch):
    import comlrl.core.rewards.shaping as shaping

    trainer = make_maac(
        tmp_path,
        reward=scripted_reward(REWARDS),
        dataset=[{"prompt": "Write a story about a cat."}],
        num_turns=2,
        num_generations=1,
        discount=GAMMA,
        rollout_buffer_size=64,
        reference_kl_enabled=True,
        reference_kl_coef=0.1,
    )
    joint_rows = []

    def values_of(rows):
        joint_rows.append([list(r) for r in rows])
        return [0.3, 0.7][: len(rows)]

    trainer.values_of = values_of
    kls = iter([[1.0, 1.0], [3.0, 3.0]])  # one call per agent: its KL at turn 1 and turn 2
    monkeypatch.setattr(shaping, "sequence_kl", lambda policy, ref, p, c, pad, **_: next(kls))
    run_unit(trainer, ItemBatch(0, 1, [trainer.train_dataset[0]]))
    (rows,) = joint_rows
    first_joint, second_joint = trainer.critic_buffer
    assert rows == [first_joint.input_ids, second_joint.input_ids]
    text = trainer.tokenizers[0].decode(first_joint.input_ids)
    assert text.startswith("[Agent 0] ") and "\n\n[Agent 1] " in text
    # agent 0 has KL 1 on both turns, agent 1 has KL 3: the critic uses the mean (2)
    assert first_joint.target == pytest.approx(0.5 - 0.2 + GAMMA * 0.7)
    assert second_joint.target == pytest.approx(1.0 - 0.2)
    a0 = flat(trainer.rollout_buffer.samples[0], "advantages")
    a1 = flat(trainer.rollout_buffer.samples[1], "advantages")
    assert a0[0] == pytest.approx(0.5 - 0.1 + GAMMA * 0.7 - 0.3)
    assert a1[0] == pytest.approx(0.5 - 0.3 + GAMMA * 0.7 - 0.3)
    assert a0[1] == pytest.approx(1.0 - 0.1 - 0.7)
    assert (
        trainer.rollout_buffer.samples[0][0].values
        == trainer.rollout_buffer.samples[1][0].values
        == [0.3]
    )


def test_maac_q_critic_sees_the_joint_action(tmp_path):
    trainer = make_maac(tmp_path, critic_type="q", rollout_buffer_size=64)
    run_unit(trainer, ItemBatch(0, 1, [trainer.train_dataset[0]]))
    joint = trainer.critic_buffer
    assert len(joint) == 2  # two generations, one joint action each
    text = trainer.tokenizers[0].decode(joint[0].input_ids)
    assert "[Joint Action]" in text and "[Agent 1 action]\n" in text
    (group,) = trainer.rollout_buffer.samples[0]
    assert joint[0].input_ids != joint[1].input_ids or (
        group.completion_ids[0] == group.completion_ids[1]
    )


def test_advantages_are_normalized_per_turn_group(tmp_path):
    trainer = make_iac(tmp_path)

    def g(turn, advs):
        return ValueGroup(0, turn, turn, [1], [[2]] * len(advs), [0.0] * len(advs), advantages=advs)

    groups = [g(0, [1.0, 3.0]), g(1, [10.0, 30.0, 20.0])]
    batches = minibatches(groups, trainer.args, random.Random(0), unit="row", sync=trainer.sync)
    by_turn = {}
    for batch, advs in batches:
        for (group, k), adv in zip(batch, advs):
            by_turn.setdefault(group.turn, {})[group.advantages[k]] = adv
    assert by_turn[0] == pytest.approx({1.0: -1.0, 3.0: 1.0})
    assert by_turn[1][20.0] == pytest.approx(0.0) and by_turn[1][30.0] > 1.0
