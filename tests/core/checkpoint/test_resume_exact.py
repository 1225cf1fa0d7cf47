"""A resumed run equals an uninterrupted one: 4 epochs in one go against 2 + resume for 2, from
an epoch boundary and from the middle of an epoch (after a crash), with exactly equal weights,
optimizer states and logged metrics."""

from __future__ import annotations

import json
import os

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from comlrl.core.checkpoint.reader import read_checkpoint_metadata
from comlrl.core.testing import tiny_model_dir
from comlrl.reinforce.magrpo import MAGRPOTrainer
from tests.core.checkpoint.test_checkpoint_helpers import (
    DATA,
    EVAL,
    assert_same_state,
    config,
    make_trainer,
    metrics,
    reward,
)

# One worker runs the whole module, so the module fixture is built once.
pytestmark = pytest.mark.xdist_group("test_resume_exact")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("uninterrupted")
    trainer = make_trainer(run_dir, 4)
    trainer.train()
    return trainer, metrics(run_dir)


def test_resume_from_epoch_boundary_equals_uninterrupted(tmp_path, uninterrupted):
    reference, reference_metrics = uninterrupted
    ckpt_dir = tmp_path / "checkpoints"
    first = make_trainer(tmp_path, 2)
    first.train(checkpoint_dir=str(ckpt_dir))
    meta = read_checkpoint_metadata(str(ckpt_dir))
    assert (meta["epoch"], meta["position"], meta["reason"]) == (2, 0, "final")
    split = len(metrics(tmp_path))

    second = make_trainer(tmp_path, 4)
    second.train(resume_from_checkpoint="latest", checkpoint_dir=str(ckpt_dir))
    assert_same_state(reference, second)
    resumed = metrics(tmp_path)
    assert resumed == reference_metrics
    assert len(resumed) > split > 0  # the second part really added records after the split


class Crash(RuntimeError):
    pass


def test_resume_mid_epoch_after_a_crash_equals_uninterrupted(tmp_path, uninterrupted):
    reference, reference_metrics = uninterrupted
    ckpt_dir = tmp_path / "checkpoints"
    calls = {"n": 0}

    def crashing_reward(c1, c2):
        if len(c1) == 4:  # a training batch (2 items x 2 samples); eval calls score 1 answer
            calls["n"] += 1
            if calls["n"] == 10:  # the first batch of epoch 4 (3 batches per epoch)
                raise Crash("worker lost")
        return reward(c1, c2)

    first = make_trainer(tmp_path, 4, reward_func=crashing_reward)
    with pytest.raises(Crash):
        # mid-epoch checkpoints every 2 batches; epoch-end ones only after epoch 3 (interval 3)
        first.train(checkpoint_dir=str(ckpt_dir), checkpoint_interval=3, checkpoint_every_batches=2)
    # Saves: batch 2 (epoch 1, item 4), batch 4 (epoch 2, item 2), batch 8 (epoch 3, item 4),
    # then the end of epoch 3. Batch 6 ends epoch 2, which interval 3 skips.
    meta = read_checkpoint_metadata(str(ckpt_dir))
    assert (meta["sequence"], meta["epoch"], meta["position"], meta["reason"]) == (
        4,
        3,
        0,
        "epoch",
    )
    # Resume from the older, mid-epoch one, although a newer checkpoint exists.
    mid = os.path.join(str(ckpt_dir), "checkpoint-3")
    mid_meta = read_checkpoint_metadata(mid)
    assert (mid_meta["epoch"], mid_meta["position"], mid_meta["reason"]) == (2, 4, "batches")
    logged_before_resume = len(metrics(tmp_path))

    second = make_trainer(tmp_path, 4)
    second.train(resume_from_checkpoint=mid, checkpoint_dir=str(ckpt_dir))
    assert_same_state(reference, second)
    assert metrics(tmp_path) == reference_metrics
    # The records of the batch after the mid-epoch checkpoint were dropped, then redone.
    assert logged_before_resume > mid_meta_records(mid)


def mid_meta_records(path: str) -> int:
    with open(os.path.join(path, "state.json"), encoding="utf-8") as fh:
        return json.load(fh)["logger"]["records"]


def test_shared_model_is_saved_once_and_resumes_shared(tmp_path):
    def build(run_dir, epochs):
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir())
        tok = AutoTokenizer.from_pretrained(tiny_model_dir())
        t = MAGRPOTrainer(
            agents=[model, model],
            tokenizer=tok,
            train_dataset=DATA,
            eval_dataset=EVAL,
            reward_func=reward,
            args=config(run_dir, epochs),
        )
        t.verbose = False
        return t

    reference = build(tmp_path / "ref", 2)
    reference.train()
    first = build(tmp_path / "run", 1)
    first.train(checkpoint_dir=str(tmp_path / "ckpt"))
    ckpt = read_checkpoint_metadata(str(tmp_path / "ckpt"))["path"]
    assert os.listdir(os.path.join(ckpt, "models")) == ["agent_0"]
    second = build(tmp_path / "run", 2)
    second.train(resume_from_checkpoint=ckpt, checkpoint_dir=str(tmp_path / "ckpt"))
    assert second.agents[0] is second.agents[1]
    assert_same_state(reference, second)
    assert metrics(tmp_path / "run") == metrics(tmp_path / "ref")
