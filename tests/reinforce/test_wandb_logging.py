"""With WANDB_MODE=offline and a wandb_config, a run records the documented metric keys."""

import time
from pathlib import Path

from comlrl.core.logging.jsonl import read_metrics

from .helpers import PROMPTS, make_trainer

KEYS = [
    "turn_1/reward_mean",
    "turn_1/expected_return",
    "agent_0/loss",
    "agent_1/loss",
    "timing/generate",
    "throughput/tokens_per_s",
    "eval/turn_1/reward_mean",
]


def _wait_for_keys(root: Path, run_id: str, timeout: float = 60.0) -> bytes:
    """The offline run log, once W&B's background writer has flushed every record to it."""
    deadline = time.monotonic() + timeout
    blob = b""
    while time.monotonic() < deadline:
        files = list(root.rglob(f"run-{run_id}.wandb"))
        assert len(files) <= 1
        blob = files[0].read_bytes() if files else b""
        if all(k.encode() in blob for k in KEYS):
            break
        time.sleep(0.5)
    return blob


def test_offline_wandb_run_has_metric_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    trainer = make_trainer(tmp_path, eval_interval=1, eval_num_samples=1)
    trainer.eval_dataset = PROMPTS[:1]
    trainer.args.report_to = ["wandb"]  # report_to alone turns W&B on
    trainer.wandb_config = {
        "project": "comlrl-test",
        "dir": str(tmp_path / "wb"),
        "name": "offline-check",
        "tags": ["test"],
    }
    trainer.train()
    run_id = trainer.reporting.logger.wandb_run_id
    assert run_id
    trainer.reporting.logger.close()
    blob = _wait_for_keys(tmp_path / "wb", run_id)
    for key in KEYS:
        assert key.encode() in blob, key
    jsonl = read_metrics(tmp_path / "run" / "metrics.jsonl")
    logged = set().union(*jsonl)
    assert set(KEYS) <= logged
