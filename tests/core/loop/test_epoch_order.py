"""`shuffle_dataset`: every epoch visits the items in a seeded order of its own; False keeps the
dataset's order (1.4.3). Resume exactness under the shuffled default is covered by
test_resume_exact.py and test_kill_resume.py, which run with the defaults."""

from __future__ import annotations

import pytest

from comlrl.core.loop.epoch_order import epoch_items, epoch_permutation
from comlrl.reinforce import MAGRPOConfig
from tests.reinforce.helpers import PROMPTS, make_trainer


def test_the_permutation_depends_on_seed_and_stage_only():
    first = epoch_permutation(16, 3, 0)
    assert sorted(first) == list(range(16)) and isinstance(first, tuple)
    assert first == epoch_permutation(16, 3, 0)
    assert first != epoch_permutation(16, 3, 1)
    assert first != epoch_permutation(16, 4, 0)
    assert epoch_permutation(16, None, 0) == epoch_permutation(16, 0, 0)


def test_the_view_follows_the_order_and_keeps_the_items():
    data = list("abcdefgh")
    args = MAGRPOConfig(seed=1)
    view = epoch_items(data, args, 2)
    assert [view[i] for i in range(len(view))] == [data[i] for i in epoch_permutation(8, 1, 2)]
    assert sorted(view[:]) == data
    assert epoch_items(data, MAGRPOConfig(seed=1, shuffle_dataset=False), 2) is data


def _visited(tmp_path, **cfg) -> list[list[str]]:
    trainer = make_trainer(tmp_path, num_train_epochs=3, rollout_buffer_size=1, **cfg)
    trainer.train_dataset = PROMPTS
    seen: dict[int, list[str]] = {}
    collect = trainer.collect

    def recording(unit):
        seen.setdefault(trainer.run_state.epoch, []).extend(item["prompt"] for item in unit.items)
        return collect(unit)

    trainer.collect = recording
    trainer.train()
    return [seen[e] for e in sorted(seen)]


def test_a_run_shuffles_each_epoch_by_default(tmp_path):
    epochs = _visited(tmp_path / "a")
    names = [p["prompt"] for p in PROMPTS]
    assert all(sorted(e) == sorted(names) for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1  # not one fixed order
    assert epochs == _visited(tmp_path / "b")  # seeded: the same run twice


def test_shuffle_dataset_false_keeps_the_dataset_order(tmp_path):
    names = [p["prompt"] for p in PROMPTS]
    assert _visited(tmp_path, shuffle_dataset=False) == [names] * 3


@pytest.mark.parametrize("bad", ["yes", 1])
def test_a_non_boolean_is_refused_naming_the_field(bad):
    with pytest.raises(ValueError, match="shuffle_dataset"):
        MAGRPOConfig(shuffle_dataset=bad)
