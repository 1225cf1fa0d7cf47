"""The Q critic's advantage and bootstrap by hand: the audit's two-answer example (rewards 1
and 0, each answer sampled half the time) gives ±0.5 with a V critic, and an accurate Q critic
must give the same signal, not the zero-mean TD error ``r - Q(h, a)``."""

import pytest

from comlrl.ac.targets import bootstrap_value, q_advantages
from comlrl.core.loop import ItemBatch, run_unit

from .helpers import flat, make_iac, make_maac, script_critic

REWARDS = [1.0, 0.0]  # the two answers of one prompt


def _answers(tmp_path, make, values, **cfg):
    def reward(a, b):
        return [REWARDS[j] for j in range(len(a))]

    trainer = make(
        tmp_path,
        reward=reward,
        dataset=[{"prompt": "Write a story about a cat."}],
        num_generations=2,
        rollout_buffer_size=64,
        **cfg,
    )
    script_critic(trainer, values)
    run_unit(trainer, ItemBatch(0, 1, [trainer.train_dataset[0]]))
    return trainer


@pytest.mark.parametrize("make", [make_iac, make_maac])
def test_v_critic_gives_plus_minus_half(tmp_path, make):
    trainer = _answers(tmp_path, make, [0.5])
    for buf in trainer.rollout_buffer.samples:
        assert flat(buf, "advantages") == pytest.approx([0.5, -0.5])


@pytest.mark.parametrize("make", [make_iac, make_maac])
def test_an_accurate_q_critic_gives_the_same_signal(tmp_path, make):
    # Q(h, a1) = 1, Q(h, a2) = 0: the TD error r - Q is 0 for both answers; Q - V is ±0.5
    trainer = _answers(tmp_path, make, list(REWARDS), critic_type="q")
    for buf in trainer.rollout_buffer.samples:
        assert flat(buf, "advantages") == pytest.approx([0.5, -0.5])
        # the critic still learns Q from the observed rewards
        assert flat(buf, "targets") == pytest.approx(REWARDS)


def test_q_advantages_by_hand():
    assert q_advantages([1.0, 0.0, 0.5]) == pytest.approx([0.5, -0.5, 0.0])
    # one action: no sibling to estimate V(h) from, Q itself
    assert q_advantages([0.3]) == [0.3]


def test_the_bootstrap_is_the_mean_over_the_childs_joint_actions():
    assert bootstrap_value([0.2, 0.4, 0.9], per_action=True) == pytest.approx(0.5)
    # a V critic's node shares one estimate
    assert bootstrap_value([0.7, 0.7], per_action=False) == 0.7
