"""Shared builders for the checkpoint and resume tests (imported by the other test modules).

A run here is two tiny offline agents, six short prompts, two samples each, eight new tokens:
about a second per epoch on a CPU. The reward is deterministic, so with a fixed seed two runs
with the same settings are identical to the last bit.
"""

from __future__ import annotations

import json
import os

import torch

from comlrl.core.testing import tiny_model_dir
from comlrl.reinforce.config import MAGRPOConfig
from comlrl.reinforce.magrpo import MAGRPOTrainer

TOPICS = ["a cat", "the sea", "a robot", "winter", "a dragon", "the moon"]
DATA = [{"prompt": f"Write a story about {t}."} for t in TOPICS]
EVAL = [{"prompt": "Write a story about a garden."}, {"prompt": "Write a story about a key."}]
NOISY_KEYS = ("timing/", "throughput/")


def reward(completions1, completions2):
    """Joint reward that prefers a longer second answer (deterministic)."""
    return [float(len(b) > len(a)) + 0.01 * len(a) for a, b in zip(completions1, completions2)]


def config(output_dir, epochs: int, **overrides) -> MAGRPOConfig:
    """A small, seeded MAGRPO config (3 rollout batches of 2 items per epoch)."""
    values = dict(
        num_train_epochs=epochs,
        num_generations=2,
        max_new_tokens=8,
        num_turns=1,
        rollout_buffer_size=2,
        eval_interval=4,
        eval_num_samples=1,
        logging_steps=1,
        seed=3,
        output_dir=str(output_dir),
        agent_learning_rate=1e-3,
    )
    values.update(overrides)
    return MAGRPOConfig(**values)


def make_trainer(output_dir, epochs: int, reward_func=reward, agents=None, **overrides):
    """A MAGRPO trainer over two tiny agents, writing its logs to ``output_dir``."""
    model_dir = tiny_model_dir()
    trainer = MAGRPOTrainer(
        agents=agents or [model_dir, model_dir],
        train_dataset=DATA,
        eval_dataset=EVAL,
        reward_func=reward_func,
        args=config(output_dir, epochs, **overrides),
    )
    trainer.verbose = False
    return trainer


def metrics(run_dir) -> list[dict]:
    """The run's metrics.jsonl without wall-clock fields."""
    out = []
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            out.append({k: v for k, v in record.items() if not k.startswith(NOISY_KEYS)})
    return out


def assert_same_state(a, b) -> None:
    """Exactly equal weights and optimizer states (every tensor, every hyper-parameter)."""
    for i, (ma, mb) in enumerate(zip(a.agents, b.agents)):
        for (name, pa), (_, pb) in zip(ma.state_dict().items(), mb.state_dict().items()):
            assert torch.equal(pa, pb), f"agent {i}: {name} differs"
    for i, (oa, ob) in enumerate(zip(a.optimizers, b.optimizers)):
        sa, sb = oa.state_dict(), ob.state_dict()
        assert sa["param_groups"] == sb["param_groups"], f"optimizer {i}: param groups differ"
        assert sa["state"].keys() == sb["state"].keys()
        for pid in sa["state"]:
            for key, value in sa["state"][pid].items():
                assert torch.equal(value, sb["state"][pid][key]), f"optimizer {i}: {pid}.{key}"
    assert a.env_step == b.env_step


def test_same_settings_give_identical_runs(tmp_path):
    # The exactness tests below rely on this: nothing but the checkpoint may differ.
    a = make_trainer(tmp_path / "a", 1)
    b = make_trainer(tmp_path / "b", 1)
    a.train()
    b.train()
    assert_same_state(a, b)
    assert metrics(tmp_path / "a") == metrics(tmp_path / "b")
    assert len(metrics(tmp_path / "a")) == 6  # 3 training records, 2 eval records and the final one
