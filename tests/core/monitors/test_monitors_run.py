"""A real (tiny) training run that drifts on purpose: after two updates its reward ties every
group, and evaluation items always score 0, so exactly the zero-variance and train/eval-gap
monitors cross; the thresholds of the others are out of reach by construction. Every monitor
reaches metrics.jsonl, TensorBoard and W&B (offline); ``stop_on`` checkpoints and ends the run,
and resuming that checkpoint finishes the run exactly as an uninterrupted one."""

from __future__ import annotations

import json
import time
import warnings

import pytest

from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.monitors import SUMMARY_FILE, MonitorWarning
from comlrl.core.monitors.metrics import key
from tests.core.checkpoint.test_checkpoint_helpers import assert_same_state
from tests.reinforce.helpers import PROMPTS, make_trainer

pytestmark = pytest.mark.xdist_group("test_monitors_run")

# Out of reach by construction: entropy is never negative, a fraction never above 1, and with
# 1 to 8 tokens per completion the mean length changes at most 8-fold (a drift of 7).
WATCHED = {
    "entropy_min": 0.0,
    "clip_fraction_max": 1.0,
    "length_drift_max": 10.0,
    "zero_variance_max": 0.5,
    "train_eval_gap_max": 0.75,
    "window": 2,
    "patience": 2,
}
EVERY_MONITOR = (
    "kl",
    "kl_acceleration",
    "entropy",
    "completion_length",
    "length_drift",
    "zero_variance_fraction",
    "clip_fraction",
)


class DriftingReward:
    """Distinct small rewards for the first two training batches, then 1 for everything (every
    group ties); eval items score 0. Its call count travels in checkpoints."""

    def __init__(self):
        self.calls = 0

    def __call__(self, a, b, batch_items=None):
        if any(item.get("eval") for item in batch_items or []):
            return [0.0] * len(a)
        self.calls += 1
        if self.calls <= 2:
            return [0.1 * i for i in range(len(a))]
        return [1.0] * len(a)

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = state["calls"]


def _trainer(tmp_path, **monitors):
    trainer = make_trainer(
        tmp_path,
        reward=DriftingReward(),
        num_train_epochs=5,
        reference_kl_enabled=True,
        reference_kl_coef=0.05,
        policy_loss="ppo",
        num_iterations=2,
        eval_interval=1,
        eval_num_samples=1,
        monitors={**WATCHED, **monitors},
    )
    trainer.eval_dataset = [{**PROMPTS[2], "eval": True}]
    return trainer


def _crossed(run_dir) -> set[str]:
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    return set(summary["crossed"])


EXPECTED = {
    key(0, 0, "zero_variance_fraction"),
    key(1, 0, "zero_variance_fraction"),
    key(None, 0, "train_eval_gap"),
}


def _wandb_blob(root, run_id, keys, timeout=60.0) -> bytes:
    deadline, blob = time.monotonic() + timeout, b""
    while time.monotonic() < deadline:
        files = list(root.rglob(f"run-{run_id}.wandb"))
        blob = files[0].read_bytes() if files else b""
        if all(k.encode() in blob for k in keys):
            break
        time.sleep(0.5)
    return blob


def test_the_drifting_run_reports_every_monitor_everywhere_and_crosses_exactly(
    tmp_path, monkeypatch
):
    from tests.core.logging.test_sinks import _scalars

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    trainer = _trainer(tmp_path)
    trainer.args.report_to = ["tensorboard", "wandb"]
    trainer.wandb_config = {"project": "comlrl-test", "dir": str(tmp_path / "wb")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    run_dir = tmp_path / "run"
    assert trainer.run_state.training_complete and trainer.run_state.stopped_by_monitor is None
    assert _crossed(run_dir) == EXPECTED
    warned = [str(w.message) for w in caught if issubclass(w.category, MonitorWarning)]
    assert len(warned) == len(EXPECTED)  # once per crossing, not once per update
    assert any("zero_variance_fraction (agent 1, turn 1)" in m for m in warned)

    keys = [key(a, 0, name) for a in (0, 1) for name in EVERY_MONITOR]
    keys.append(key(None, 0, "train_eval_gap"))
    logged = set().union(*read_metrics(run_dir / "metrics.jsonl"))
    assert set(keys) <= logged
    assert set(keys) <= set(_scalars(run_dir / "tensorboard"))
    run_id = trainer.reporting.logger.wandb_run_id
    trainer.reporting.logger.close()
    blob = _wandb_blob(tmp_path / "wb", run_id, keys)
    for k in keys:
        assert k.encode() in blob, k


def test_stop_on_checkpoints_ends_cleanly_and_the_checkpoint_resumes_exactly(tmp_path):
    from comlrl.core.checkpoint.reader import read_checkpoint_metadata

    stop = {"stop_on": ["zero_variance_fraction"]}
    ckpt = tmp_path / "stopped" / "checkpoints"
    stopped = _trainer(tmp_path / "stopped", **stop)
    with pytest.warns(MonitorWarning, match="zero_variance_fraction"):
        stopped.train(checkpoint_dir=str(ckpt))
    assert "zero_variance_fraction" in stopped.run_state.stopped_by_monitor
    assert not stopped.run_state.training_complete and not stopped.run_state.interrupted
    meta = read_checkpoint_metadata(str(ckpt))
    # Two distinct-reward updates, then two tied ones (patience 2): it stops after the 4th.
    assert (meta["reason"], meta["epoch"], meta["position"]) == ("monitor", 3, 2)
    summary = json.loads((tmp_path / "stopped" / "run" / SUMMARY_FILE).read_text())
    assert summary["ended"] == "stopped by a monitor" and summary["stop"]

    resumed = _trainer(tmp_path / "stopped", **stop)
    with warnings.catch_warnings():
        # The crossings before the stop warned already; the rest of the run crosses nothing new
        # that stops it (the gap crosses once, and is not in stop_on).
        warnings.simplefilter("ignore", MonitorWarning)
        resumed.train(resume_from_checkpoint="latest", checkpoint_dir=str(ckpt))
    assert resumed.run_state.training_complete and resumed.run_state.stopped_by_monitor is None

    uninterrupted = _trainer(tmp_path / "whole")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MonitorWarning)
        uninterrupted.train()
    assert_same_state(uninterrupted, resumed)
    assert _crossed(tmp_path / "stopped" / "run") == _crossed(tmp_path / "whole" / "run")
