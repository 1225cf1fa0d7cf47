"""Core's policy update: the mini-batches it cuts from an agent's groups and the rows it hands
to the loss."""

from __future__ import annotations

import random

from comlrl.core.rollout.record import RolloutGroup
from comlrl.core.training.policy_update import group_rows, turn_minibatches


def _group(turn: int, step: int, k: int = 2) -> RolloutGroup:
    return RolloutGroup(
        agent=0,
        turn=turn,
        step=step,
        prompt_ids=[1, step],
        completion_ids=[[step, j] for j in range(k)],
        returns=[float(j) for j in range(k)],
    )


def test_minibatches_stay_within_a_turn_and_every_pass_covers_every_group():
    groups = [_group(t, s) for s in range(5) for t in (0, 1)]
    batches = list(turn_minibatches(list(groups), 2, passes=3, rng=random.Random(0)))
    assert all(len({g.turn for g in b}) == 1 for b in batches)
    per_pass = len(batches) // 3
    assert per_pass == 6  # 5 groups per turn in batches of 2: 3 + 3
    for p in range(3):
        seen = [g for b in batches[p * per_pass : (p + 1) * per_pass] for g in b]
        assert sorted(id(g) for g in seen) == sorted(id(g) for g in groups)
        assert [b[0].turn for b in batches[p * per_pass : (p + 1) * per_pass]] == [0] * 3 + [1] * 3
    orders = [
        [g.step for b in batches[p * per_pass : p * per_pass + 3] for g in b] for p in range(3)
    ]
    assert len({tuple(o) for o in orders}) > 1  # each pass reshuffles


def test_the_same_seed_cuts_the_same_minibatches():
    groups = [_group(0, s) for s in range(7)]
    first = [[g.step for g in b] for b in turn_minibatches(list(groups), 3, 2, random.Random(5))]
    again = [[g.step for g in b] for b in turn_minibatches(list(groups), 3, 2, random.Random(5))]
    assert first == again and [len(b) for b in first] == [3, 3, 1, 3, 3, 1]


def test_rows_are_one_per_completion_with_their_group_size_and_logprobs():
    a, b = _group(0, 1, k=2), _group(0, 2, k=3)
    a.old_logps = [[-0.1, -0.2], [-0.3, -0.4]]
    cols = group_rows([a, b], [[1.0, -1.0], [0.5, 0.0, -0.5]])
    assert cols["completions"] == a.completion_ids + b.completion_ids
    assert cols["prompts"] == [a.prompt_ids] * 2 + [b.prompt_ids] * 3
    assert cols["advantages"] == [1.0, -1.0, 0.5, 0.0, -0.5]
    assert cols["sizes"] == [2, 2, 3, 3, 3]
    assert cols["old"] == [[-0.1, -0.2], [-0.3, -0.4], None, None, None]
    assert cols["ref"] == [None] * 5


class _OneRank:
    """A trainer's ``sync`` on one process: nothing to pool."""

    def pooled_moments(self, tensors):
        return None


def test_row_minibatches_normalize_each_turn_and_keep_every_row_once():

    from comlrl.core.training.policy_update import turn_row_minibatches

    groups = [_group(t, s, k=3) for s in range(3) for t in (0, 1)]
    for g in groups:
        g.advantages = [float(g.step + 10 * g.turn + j) for j in range(3)]
    batches = turn_row_minibatches(
        _OneRank(), groups, 4, random.Random(0), normalize=True, num_turns=1
    )
    rows = [r for b, _ in batches for r in b]
    assert sorted((id(g), k) for g, k in rows) == sorted(
        (id(g), k) for g in groups for k in range(3)
    )
    assert all(len({g.turn for g, _ in b}) == 1 for b, _ in batches)
    for turn in (0, 1):
        advs = [a for b, av in batches for (g, _), a in zip(b, av) if g.turn == turn]
        assert abs(sum(advs)) < 1e-9 and abs(sum(a * a for a in advs) / len(advs) - 1) < 1e-9
    raw = turn_row_minibatches(None, groups, 4, random.Random(0), normalize=False, num_turns=1)
    assert all(a == g.advantages[k] for b, av in raw for (g, k), a in zip(b, av))


def test_a_ratio_loss_without_rollout_logprobs_is_refused_by_name():
    from types import SimpleNamespace

    import pytest

    from comlrl.core.training.policy_update import require_old_logps

    config = SimpleNamespace(policy_loss="ppo")
    require_old_logps(config, [[-0.1], []])  # an empty completion's log-probs are present
    with pytest.raises(ValueError, match=r"policy_loss='ppo'.*1 of 2 samples"):
        require_old_logps(config, [[-0.1], None])


def test_minibatches_cut_groups_or_rows_over_every_pass_and_name_a_wrong_unit():
    from types import SimpleNamespace

    import pytest

    from comlrl.core.training.policy_update import minibatches

    groups = [_group(t, s, k=3) for s in range(3) for t in (0, 1)]
    for g in groups:
        g.advantages = [0.0, 1.0, 2.0]
    args = SimpleNamespace(
        train_batch_size=2, num_iterations=2, advantage_normalization=False, num_turns=1
    )
    by_group = minibatches(groups, args, random.Random(0))
    assert sum(len(b) for b in by_group) == 2 * len(groups)  # two passes of groups
    by_row = minibatches(groups, args, random.Random(0), unit="row", sync=_OneRank())
    assert sum(len(rows) for rows, _ in by_row) == 2 * 3 * len(groups)  # two passes of rows
    with pytest.raises(ValueError, match=r"unit must be one of \['group', 'row'\]"):
        minibatches(groups, args, random.Random(0), unit="token")
