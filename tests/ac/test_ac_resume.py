"""Checkpoint resume equals an uninterrupted run for the actor-critic trainers: actors, critics
(or value heads), every optimizer, buffered samples and logged metrics."""

from __future__ import annotations

import json
import os

import pytest
import torch

from comlrl.ac import IACConfig, IACTrainer, MAACConfig, MAACTrainer

DATA = [{"prompt": f"Write a story about {t}."} for t in ("a cat", "the sea", "a robot", "winter")]
EVAL = [{"prompt": "Write a story about a garden."}]
NOISY_KEYS = ("timing/", "throughput/")


def reward(a, b):
    """Deterministic joint reward that prefers a longer second answer."""
    return [float(len(y) > len(x)) + 0.01 * len(x) for x, y in zip(a, b)]


def make(cls, tiny_dir, run_dir, epochs, **overrides):
    cfg_cls = IACConfig if cls is IACTrainer else MAACConfig
    values = dict(
        num_train_epochs=epochs,
        num_generations=2,
        num_turns=1,
        max_new_tokens=8,
        # one item per rollout batch, a drain every second item: mid-epoch checkpoints after an
        # odd batch hold samples that are still buffered
        rollout_batch_size=1,
        rollout_buffer_size=4,
        eval_interval=3,
        eval_num_samples=1,
        logging_steps=1,
        seed=5,
        agent_learning_rate=1e-3,
        critic_learning_rate=1e-3,
        output_dir=str(run_dir),
    )
    values.update(overrides)
    kwargs = {}
    if cls is MAACTrainer or values.get("use_separate_critic", True):
        kwargs["critic_model"] = tiny_dir
    trainer = cls(
        agent_model=tiny_dir,
        train_dataset=DATA,
        eval_dataset=EVAL,
        reward_func=reward,
        args=cfg_cls(**values),
        **kwargs,
    )
    trainer.verbose = False
    return trainer


def metrics(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh]
    return [{k: v for k, v in r.items() if not k.startswith(NOISY_KEYS)} for r in records]


def assert_same_state(a, b) -> None:
    ma, mb = a.trainable_models(), b.trainable_models()
    assert list(ma) == list(mb)
    for name in ma:
        for (key, pa), (_, pb) in zip(ma[name].state_dict().items(), mb[name].state_dict().items()):
            assert torch.equal(pa, pb), f"{name}: {key} differs"
    for i, (oa, ob) in enumerate(zip(a.optimizers_list(), b.optimizers_list())):
        sa, sb = oa.state_dict(), ob.state_dict()
        assert sa["param_groups"] == sb["param_groups"], f"optimizer {i}"
        assert sa["state"].keys() == sb["state"].keys() and sa["state"], f"optimizer {i}"
        for pid in sa["state"]:
            for key, value in sa["state"][pid].items():
                assert torch.equal(value, sb["state"][pid][key]), f"optimizer {i}: {pid}.{key}"
    assert a.env_step == b.env_step


class Crash(RuntimeError):
    pass


@pytest.mark.parametrize(
    "cls, overrides",
    [
        (IACTrainer, {}),
        (IACTrainer, {"use_separate_critic": False}),
        (MAACTrainer, {}),
        # buffered samples carry their rollout log-probs through the checkpoint
        (IACTrainer, {"policy_loss": "ppo", "num_iterations": 2}),
    ],
    ids=["iac-critics", "iac-value-heads", "maac", "ippo"],
)
def test_resume_equals_uninterrupted(tmp_path, tiny_dir, cls, overrides):
    reference = make(cls, tiny_dir, tmp_path / "reference", 2, **overrides)
    reference.train()

    # A run that dies at the start of epoch 2, after a mid-epoch checkpoint (batch 3 of 4,
    # with one item's samples still in the buffers)...
    calls = {"n": 0}

    def crashing(a, b):
        if len(a) == 2:  # training batches score 1 item x 2 samples; eval scores 1
            calls["n"] += 1
            if calls["n"] == 5:
                raise Crash("worker lost")
        return reward(a, b)

    ckpt = tmp_path / "checkpoints"
    first = make(cls, tiny_dir, tmp_path / "run", 2, **overrides)
    first.reward_caller.reward_func = crashing
    with pytest.raises(Crash):
        first.train(checkpoint_dir=str(ckpt), checkpoint_interval=5, checkpoint_every_batches=3)
    state = json.loads((ckpt / "checkpoint-1" / "state.json").read_text())
    assert any(state["family"]["rollout_buffers"]), "the checkpoint should hold buffered samples"

    # ...continues in a fresh process-like trainer and ends where the reference ended.
    second = make(cls, tiny_dir, tmp_path / "run", 2, **overrides)
    second.train(resume_from_checkpoint="latest", checkpoint_dir=str(ckpt))
    assert_same_state(reference, second)
    assert metrics(tmp_path / "run") == metrics(tmp_path / "reference")
