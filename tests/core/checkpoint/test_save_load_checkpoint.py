"""The trainers' public ``save_checkpoint(path)`` and ``load_checkpoint(path)`` (CoMLRL 1.4.3's
API): they write and read the files of one ``train(checkpoint_dir=...)`` checkpoint, round-trip
a trainer's state, and a run resumed from them equals the uninterrupted one. Also: building a
trainer leaves the agents' configs alone, and ``train()`` checks its checkpoint integers first."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
import torch

from comlrl.core.checkpoint import claim
from comlrl.core.checkpoint.layout import MANIFEST
from comlrl.core.checkpoint.reader import read_checkpoint_metadata
from comlrl.core.testing import tiny_pair
from comlrl.trainers.actor_critic import IACConfig, IACTrainer
from comlrl.trainers.preference import MADPOConfig, MADPOTrainer
from comlrl.trainers.reinforce import MAGRPOTrainer
from tests.core.checkpoint.test_checkpoint_helpers import (
    DATA,
    assert_same_state,
    config,
    make_trainer,
    metrics,
    reward,
)

pytestmark = pytest.mark.xdist_group("test_save_load_checkpoint")


def _trainer(run_dir, epochs):
    # eval_interval=0: no evaluation, so nothing is logged after the last checkpoint.
    return make_trainer(run_dir, epochs, eval_interval=0)


def test_save_then_resume_equals_the_uninterrupted_run(tmp_path):
    reference = _trainer(tmp_path / "ref", 2)
    reference.train()

    first = _trainer(tmp_path / "run", 1)
    first.train()
    path = first.save_checkpoint(tmp_path / "manual")
    assert path == str(tmp_path / "manual")
    assert os.path.isfile(tmp_path / "manual" / MANIFEST)
    meta = read_checkpoint_metadata(path)
    assert (meta["epoch"], meta["position"], meta["reason"]) == (1, 0, "manual")

    second = _trainer(tmp_path / "run", 2)
    second.train(resume_from_checkpoint=path)
    assert_same_state(reference, second)
    assert metrics(tmp_path / "run") == metrics(tmp_path / "ref")


def test_load_checkpoint_restores_weights_optimizers_and_counters(tmp_path):
    source = _trainer(tmp_path / "src", 1)
    source.train()
    source.save_checkpoint(tmp_path / "ckpt")

    target = _trainer(tmp_path / "dst", 1)
    before = [p.clone() for p in target.agents[0].parameters()]
    progress = target.load_checkpoint(tmp_path / "ckpt")
    assert (progress["epoch"], progress["position"]) == (1, 0)
    assert progress["env_step"] == source.env_step > 0
    assert progress["global_batch"] == source.run_state.global_batch > 0
    assert target.run_state.global_batch == source.run_state.global_batch
    assert_same_state(source, target)
    assert any(not torch.equal(a, b) for a, b in zip(before, target.agents[0].parameters()))
    # The random generators come back as they were when the checkpoint was written.
    torch.manual_seed(0)
    source.save_checkpoint(tmp_path / "ckpt")  # replaces the checkpoint in place
    expected = torch.rand(3)
    torch.manual_seed(1)
    target.load_checkpoint(tmp_path / "ckpt")
    assert torch.equal(torch.rand(3), expected)


def test_a_fresh_trainer_round_trips_and_saving_draws_no_random_numbers(tmp_path):
    source = _trainer(tmp_path / "src", 1)
    torch.manual_seed(5)
    expected = torch.rand(2)
    torch.manual_seed(5)
    source.save_checkpoint(tmp_path / "initial")
    assert torch.equal(torch.rand(2), expected)
    target = _trainer(tmp_path / "dst", 1)
    progress = target.load_checkpoint(tmp_path / "initial")
    assert (progress["epoch"], progress["position"], progress["env_step"]) == (0, 0, 0)
    assert_same_state(source, target)


def test_save_checkpoint_refuses_a_directory_that_is_not_a_checkpoint(tmp_path):
    trainer = _trainer(tmp_path / "run", 1)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="is not a checkpoint"):
        trainer.save_checkpoint(tmp_path / "notes")
    assert (tmp_path / "notes" / "keep.txt").read_text() == "mine"
    (tmp_path / "empty").mkdir()
    assert trainer.save_checkpoint(tmp_path / "empty") == str(tmp_path / "empty")


def test_load_checkpoint_refuses_another_configuration(tmp_path):
    source = _trainer(tmp_path / "src", 1)
    source.save_checkpoint(tmp_path / "ckpt")
    other = make_trainer(tmp_path / "dst", 1, eval_interval=0, agent_learning_rate=5e-4)
    with pytest.raises(ValueError, match="agent_learning_rate"):
        other.load_checkpoint(tmp_path / "ckpt")


@pytest.mark.parametrize("family", ["iac", "madpo"])
def test_every_family_has_the_checkpoint_methods(tmp_path, family):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    common = dict(agents=[m0, m1], tokenizer=tok, train_dataset=DATA[:2], reward_func=reward)
    if family == "iac":
        cls = IACTrainer
        args = IACConfig(
            num_turns=1, num_generations=1, max_new_tokens=4, use_separate_critic=False
        )
    else:
        cls, args = MADPOTrainer, MADPOConfig(num_train_epochs=1, max_new_tokens=4)
    source = cls(**common, args=args)
    others = [tiny_pair(seed=2)[0], tiny_pair(seed=3)[0]]
    target = cls(**{**common, "agents": others}, args=args)
    source.save_checkpoint(tmp_path / "ckpt")
    target.load_checkpoint(tmp_path / "ckpt")
    for a, b in zip(source.agents, target.agents):
        for pa, pb in zip(a.parameters(), b.parameters()):
            assert torch.equal(pa, pb)


# ------------------------------------------------------------------ construction
def test_building_a_trainer_leaves_the_agents_special_ids_alone(tmp_path):
    model, tok = tiny_pair(seed=0)
    model.config.pad_token_id = None
    model.generation_config.pad_token_id = None
    model.config.eos_token_id = 2
    model.generation_config.eos_token_id = 2
    assert tok.eos_token_id != 2 and tok.pad_token_id is not None
    before = (model.config.to_dict(), model.generation_config.to_dict())
    trainer = MAGRPOTrainer(
        agents=[model, tiny_pair(seed=1)[0]],
        tokenizer=tok,
        train_dataset=DATA[:2],
        reward_func=reward,
        args=config(tmp_path, 1, eval_interval=0, max_new_tokens=4),
    )
    agent = trainer.agents[0]
    assert (agent.config.to_dict(), agent.generation_config.to_dict()) == before
    # Generation still pads and stops with the tokenizer's ids, which it passes explicitly.
    trainer.train()
    assert (agent.config.pad_token_id, agent.config.eos_token_id) == (None, 2)


# ------------------------------------------------------------------ train() arguments
@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"checkpoint_interval": 0}, "checkpoint_interval"),
        ({"checkpoint_interval": True}, "checkpoint_interval"),
        ({"checkpoint_interval": 1.0}, "checkpoint_interval"),
        ({"checkpoint_total_limit": 0}, "checkpoint_total_limit"),
        ({"checkpoint_every_batches": np.int64(-1)}, "checkpoint_every_batches"),
    ],
)
def test_train_checks_its_checkpoint_integers_before_anything_else(tmp_path, kwargs, field):
    trainer = _trainer(tmp_path, 1)
    trainer.train_dataset = None  # read by anything else train() does: never reached
    with pytest.raises(ValueError, match=f"{field} must be a positive integer"):
        trainer.train(**kwargs)
    assert trainer.reporting.logger is None  # nothing was set up


def test_train_accepts_numpy_integers(tmp_path):
    trainer = _trainer(tmp_path, 1)
    trainer.train(
        checkpoint_dir=str(tmp_path / "ckpts"),
        checkpoint_interval=np.int64(1),
        checkpoint_total_limit=np.int32(1),
        checkpoint_every_batches=np.int64(2),
    )
    assert read_checkpoint_metadata(str(tmp_path / "ckpts"))["reason"] == "final"
    # The trainer keeps the run's identity for save_checkpoint, not the session: the
    # checkpoint directory's lock goes with the session once train() has returned.
    gc.collect()
    assert claim._held[os.path.realpath(tmp_path / "ckpts")].fd is None
    path = trainer.save_checkpoint(tmp_path / "manual")
    assert (
        read_checkpoint_metadata(path)["run_id"]
        == read_checkpoint_metadata(str(tmp_path / "ckpts"))["run_id"]
    )


def test_save_checkpoint_refuses_to_run_inside_train(tmp_path):
    holder = {}

    def saving_reward(a, b):
        holder["trainer"].save_checkpoint(tmp_path / "inside")
        return reward(a, b)

    trainer = make_trainer(tmp_path / "run", 1, reward_func=saving_reward, eval_interval=0)
    holder["trainer"] = trainer
    with pytest.raises(RuntimeError, match="save_checkpoint cannot run while train"):
        trainer.train()
    assert not (tmp_path / "inside").exists()
    trainer.save_checkpoint(tmp_path / "after")  # allowed again once train() has returned
