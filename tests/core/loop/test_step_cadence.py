"""``logging_steps``, ``eval_steps`` and ``save_steps`` count optimizer steps (as TRL's do) or,
with ``steps_unit='env'``, env steps; the marks travel in checkpoints."""

from __future__ import annotations

import json
import os

from comlrl.core.checkpoint.layout import list_checkpoints
from comlrl.core.loop.run_state import RunState
from comlrl.core.loop.step_cadence import due, restart_marks
from tests.reinforce.helpers import PROMPTS, make_trainer

# One optimizer step per agent and update: a buffer of 2 nodes, mini-batches of 2.
ONE_STEP_PER_UPDATE = dict(rollout_buffer_size=2, train_batch_size=2, num_train_epochs=6)


def _trainer(tmp_path, **cfg):
    trainer = make_trainer(tmp_path, **{**ONE_STEP_PER_UPDATE, **cfg})
    trainer.train_dataset = PROMPTS[:4]
    return trainer


def _logged_counts(trainer):
    """The optimizer-step count at every training record the cadence let through."""
    counts = []
    log_record = trainer.reporting.log_record

    def recording(metrics, step=None):
        counts.append(trainer.run_state.optimizer_steps())
        return log_record(metrics, step)

    trainer.reporting.log_record = recording
    return counts


def test_logging_steps_count_optimizer_steps(tmp_path):
    trainer = _trainer(tmp_path, logging_steps=3)
    counts = _logged_counts(trainer)
    trainer.train()
    total = trainer.run_state.optimizer_steps()
    assert total == 12  # 6 epochs x 4 items, a 2-node buffer each update
    assert counts == [1, 4, 7, 10]


def test_env_steps_keep_the_earlier_counting(tmp_path):
    trainer = _trainer(tmp_path, logging_steps=5, steps_unit="env")
    logged = []
    log_record = trainer.reporting.log_record

    def recording(metrics, step=None):
        logged.append(step)
        return log_record(metrics, step)

    trainer.reporting.log_record = recording
    trainer.train()
    assert len(logged) > 2
    assert all(b - a >= 5 for a, b in zip(logged, logged[1:]))
    # Each update here covers 4 env steps (2 nodes x 2 joint actions): an optimizer-step
    # count of 5 would log far more sparsely.
    assert len(logged) > trainer.run_state.optimizer_steps() // 5 + 1


def test_eval_steps_evaluate_every_n_optimizer_steps(tmp_path):
    trainer = _trainer(tmp_path, eval_steps=4, eval_interval=1, eval_at_end=False)
    trainer.eval_dataset = PROMPTS[:1]
    seen = []
    trainer.evaluate = lambda *a, **k: seen.append(trainer.run_state.optimizer_steps()) or {}
    trainer.train()
    # eval_steps replaces eval_interval (which would evaluate before every item)
    assert seen == [4, 8]


def test_save_steps_without_a_checkpoint_dir_write_into_the_run_dir(tmp_path):
    trainer = _trainer(tmp_path, save_steps=5)
    trainer.train()
    directory = os.path.join(str(tmp_path / "run"), "checkpoints")
    saved = [
        json.load(open(os.path.join(p, "manifest.json"))) for _, p in list_checkpoints(directory)
    ]
    reasons = [m.get("reason") for m in saved]
    # At 5 and 10 optimizer steps, then the final one; no per-epoch saves.
    assert reasons.count("steps") == 2 and reasons[-1] == "final", reasons
    assert len(reasons) == 3


def test_a_resumed_run_keeps_its_cadence_marks(tmp_path):
    cadence = dict(save_steps=5, eval_steps=3, eval_at_end=False)
    first = _trainer(tmp_path, num_train_epochs=3, **cadence)
    first.eval_dataset = PROMPTS[:1]
    first.evaluate = lambda *a, **k: {}
    first.train()
    # Evaluation is checked before each unit: the one due at 6 steps found no unit left.
    assert first.run_state.optimizer_steps() == 6 and first.run_state.cadence_marks == {
        "eval": 3,
        "save": 5,
    }
    path = list_checkpoints(os.path.join(str(tmp_path / "run"), "checkpoints"))[-1][1]

    again = _trainer(tmp_path, num_train_epochs=6, **cadence)
    again.eval_dataset = PROMPTS[:1]
    seen = []
    again.evaluate = lambda *a, **k: seen.append(again.run_state.optimizer_steps()) or {}
    again.train(resume_from_checkpoint=path)
    assert seen == [6, 9]
    assert again.run_state.cadence_marks == {"eval": 9, "save": 10}


def test_marks_of_another_unit_start_afresh():
    state = RunState(environment_steps=40, agent_steps={0: 7, 1: 7})
    state.cadence_marks, state.log_mark = {"eval": 6}, 5
    restored = RunState()
    restored.load_state_dict(state.state_dict())
    assert restored == state
    assert due(restored, "optimizer", "eval", 1) and not due(restored, "optimizer", "eval", 1)

    # Marks counted in another unit: the cadences restart from now, in the unit of the run.
    restart_marks(restored, "optimizer")
    assert restored.log_mark == -1
    assert restored.cadence_marks == {"eval": 7, "save": 7}
    restart_marks(restored, "env")
    assert restored.cadence_marks == {"eval": 40, "save": 40}
