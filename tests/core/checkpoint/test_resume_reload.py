"""Trained agents reload as the starting point of a new run: ``save_model`` output and a
checkpoint's model directories both pass as ``agents=[dir0, dir1]`` and keep training."""

from __future__ import annotations

import torch

from tests.core.checkpoint.test_checkpoint_helpers import make_trainer


def _same_weights(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_saved_agents_reload_into_a_new_magrpo_trainer_and_keep_training(tmp_path):
    first = make_trainer(tmp_path / "first", 1)
    first.train(checkpoint_dir=str(tmp_path / "ckpt"))
    first.save_model(str(tmp_path / "export"))

    exported = [str(tmp_path / "export" / f"agent_{i}") for i in range(2)]
    from_checkpoint = [
        str(tmp_path / "ckpt" / "checkpoint-1" / "models" / f"agent_{i}") for i in range(2)
    ]
    for label, dirs in (("exported", exported), ("checkpoint", from_checkpoint)):
        second = make_trainer(tmp_path / label, 1, agents=dirs)
        for i in range(2):
            assert _same_weights(first.agents[i], second.agents[i])
            assert second.tokenizers[i].get_vocab() == first.tokenizers[i].get_vocab()
        start = [p.detach().clone() for p in second.agents[0].parameters()]
        second.train()
        moved = [not torch.equal(a, b) for a, b in zip(start, second.agents[0].parameters())]
        assert all(moved), "every trainable parameter changes in the continued run"
