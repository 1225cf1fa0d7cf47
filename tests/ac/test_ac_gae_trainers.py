"""GAE(λ) inside IAC and MAAC: scripted 3-turn trajectories give the hand-derived advantages and
λ-returns, a short multi-turn run trains with gae_lambda=0.95, and a single turn is unchanged."""

import math

import pytest
import torch

from comlrl.core.loop import ItemBatch, run_unit

from .helpers import flat, make_iac, make_maac, script_critic

GAMMA = 0.9
ONE_ITEM = [{"prompt": "Write a story about a cat."}]
# r = (1, 0, 2), V_old = (0.5, 1.0, 1.5): see test_ac_gae.py for the derivation.
REWARDS = [1.0, 0.0, 2.0]
VALUES = [0.5, 1.0, 1.5]
BY_HAND = {
    0.0: ([1.4, 0.35, 0.5], [1.9, 1.35, 2.0]),
    0.5: ([1.65875, 0.575, 0.5], [2.15875, 1.575, 2.0]),
    1.0: ([2.12, 0.8, 0.5], [2.62, 1.8, 2.0]),
}


def scripted_reward(values):
    queue = list(values)

    def reward(a, b):
        return [queue.pop(0) for _ in a]

    return reward


def _scripted(tmp_path, make, rewards, **cfg):
    trainer = make(
        tmp_path,
        reward=scripted_reward(rewards),
        dataset=ONE_ITEM,
        num_turns=3,
        num_generations=1,
        discount=GAMMA,
        rollout_buffer_size=64,
        **cfg,
    )
    script_critic(trainer, VALUES)
    run_unit(trainer, ItemBatch(0, 1, [trainer.train_dataset[0]]))
    return trainer


@pytest.mark.parametrize("lam", sorted(BY_HAND))
@pytest.mark.parametrize("separate", [True, False])
def test_iac_three_turns_by_hand(tmp_path, lam, separate):
    trainer = _scripted(tmp_path, make_iac, REWARDS, gae_lambda=lam, separate=separate)
    advantages, targets = BY_HAND[lam]
    for agent in range(2):
        buf = trainer.rollout_buffer.samples[agent]
        assert [g.turn for g in buf] == [0, 1, 2]
        assert flat(buf, "advantages") == pytest.approx(advantages)
        assert flat(buf, "targets") == pytest.approx(targets)
        # the last turn has nothing after it: exactly the TD(0) numbers, at any λ
        assert buf[2].targets == [2.0] and buf[2].advantages == [2.0 - 1.5]


@pytest.mark.parametrize("lam", sorted(BY_HAND))
def test_maac_three_turns_by_hand(tmp_path, lam):
    trainer = _scripted(tmp_path, make_maac, REWARDS, gae_lambda=lam)
    advantages, targets = BY_HAND[lam]
    assert [s.target for s in trainer.critic_buffer] == pytest.approx(targets)
    for agent in range(2):
        assert flat(trainer.rollout_buffer.samples[agent], "advantages") == pytest.approx(
            advantages
        )


@pytest.mark.parametrize("make", [make_iac, make_maac])
def test_terminated_early_trajectory(tmp_path, make):
    # reward 1.0 > 0.5 ends the episode after turn 2; δ = (0 + 0.9·1.0 - 0.5, 1.0 - 1.0)
    trainer = _scripted(tmp_path, make, [0.0, 1.0], gae_lambda=0.5, early_termination_threshold=0.5)
    buf = trainer.rollout_buffer.samples[0]
    assert flat(buf, "advantages") == pytest.approx([0.4 + 0.45 * 0.0, 0.0])
    assert flat(buf, "targets") == pytest.approx([0.9, 1.0])


def _weights(trainer):
    models = list(trainer.agents) + list(trainer.critics or trainer.value_heads)
    return [p.detach().clone() for m in models for p in m.parameters()]


@pytest.mark.parametrize("make", [make_iac, make_maac])
def test_single_turn_gae_equals_td0_bitwise(tmp_path, make):
    runs = []
    for lam in (0.0, 0.95):
        trainer = make(tmp_path / str(lam), gae_lambda=lam, weight_decay=0.0)
        trainer.verbose = False
        trainer.train()
        runs.append(_weights(trainer))
    assert all(torch.equal(a, b) for a, b in zip(*runs))


@pytest.mark.parametrize("make", [make_iac, make_maac])
def test_multi_turn_run_trains_with_gae(tmp_path, make):
    trainer = make(
        tmp_path, num_turns=2, num_generations=1, gae_lambda=0.95, discount=0.9, weight_decay=0.0
    )
    trainer.verbose = False
    seen = {}
    original = trainer._update

    def spy(buffers, joint):
        seen["buffers"] = [list(b) for b in buffers]
        seen["joint"] = list(joint)
        return original(buffers, joint)

    trainer._update = spy
    before = _weights(trainer)
    trainer.train()
    after = _weights(trainer)
    assert any(not torch.equal(a, b) for a, b in zip(before, after))
    assert all(torch.isfinite(p).all() for p in after)
    # each agent's turn-1 advantage carries 0.9·0.95 of its turn-2 advantage
    for buf in seen["buffers"]:
        # one completion per node: an item's turn 1 and turn 2 are consecutive groups
        assert [g.turn for g in buf] == [0, 1] * (len(buf) // 2)
        for first, second in zip(buf[::2], buf[1::2]):
            (adv,), (adv2,) = first.advantages, second.advantages
            td = first.rewards[0] + 0.9 * second.values[0] - first.values[0]
            assert adv == pytest.approx(td + 0.9 * 0.95 * adv2)
            assert first.targets[0] == pytest.approx(adv + first.values[0])
            assert math.isfinite(adv)
