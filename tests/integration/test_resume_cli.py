"""Resuming from the command line and the resume example.

``comlrl train --resume`` continues a checkpointed run with its saved config, to the same
metrics as an uninterrupted run. ``examples/resume_training.py`` logs both of its parts into one
metrics.jsonl and, with W&B offline, into one W&B run id.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re

import yaml

from comlrl.core.checkpoint.reader import read_checkpoint_metadata
from comlrl.core.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = [
    "magrpo.num_generations=2",
    "magrpo.max_new_tokens=8",
    "magrpo.rollout_buffer_size=2",
    "magrpo.eval_interval=2",
    "dataset.train_limit=4",
    "dataset.eval_limit=1",
    "output.verbose=false",
    "output.save_final_model=false",
]


def _args(*extra: str) -> list[str]:
    out = ["train"]
    for item in SMALL + list(extra):
        out += ["--set", item]
    return out


def _metrics(path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh]
    return [
        {k: v for k, v in r.items() if not k.startswith(("timing/", "throughput/"))}
        for r in records
    ]


def test_cli_resume_continues_the_run_exactly(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(_args("magrpo.num_train_epochs=2", "output.run_name=whole")) == 0
    assert main(_args("magrpo.num_train_epochs=1", "output.run_name=split")) == 0
    run = tmp_path / "runs" / "split"
    assert read_checkpoint_metadata(str(run))["epoch"] == 1

    # Only the run dir and the new epoch count: everything else comes from its config.yaml.
    assert main(["train", "--resume", str(run), "--set", "magrpo.num_train_epochs=2"]) == 0
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["magrpo"]["num_train_epochs"] == 2 and saved["dataset"]["train_limit"] == 4
    assert _metrics(run / "metrics.jsonl") == _metrics(
        tmp_path / "runs" / "whole" / "metrics.jsonl"
    )
    meta = read_checkpoint_metadata(str(run))
    assert meta["epoch"] == 2
    # total_limit 1 (the default) keeps the newest only; the resumed-from one is spared.
    assert sorted(os.listdir(run / "checkpoints")) == ["checkpoint-1", "checkpoint-2", "latest"]


def test_cli_resume_latest_picks_the_named_or_newest_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(_args("magrpo.num_train_epochs=1", "output.run_name=old")) == 0
    assert main(_args("magrpo.num_train_epochs=1", "output.run_name=new")) == 0
    capsys.readouterr()
    assert main(["train", "--resume", "--set", "magrpo.num_train_epochs=2"]) == 0
    assert "resuming runs/new" in capsys.readouterr().out
    assert read_checkpoint_metadata("runs/new")["epoch"] == 2
    assert read_checkpoint_metadata("runs/old")["epoch"] == 1


def test_checkpoint_section_is_validated_before_loading(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(_args("checkpoint.interval=0")) == 2
    assert "checkpoint.interval must be >= 1" in capsys.readouterr().err
    assert main(_args("checkpoint.every=2")) == 2
    assert re.search("checkpoint has no key 'every'.*'every_batches'", capsys.readouterr().err)
    assert not (tmp_path / "runs").exists()


def _load_example():
    spec = importlib.util.spec_from_file_location(
        "resume_training_example", os.path.join(REPO, "examples", "resume_training.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_logs_both_parts_into_one_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    example = _load_example()
    result = example.main(["--run-dir", str(tmp_path / "run"), "--wandb"])
    first_id, second_id = result["wandb_run_ids"]
    assert first_id is not None and first_id == second_id
    offline_runs = glob.glob(str(tmp_path / "run" / "wandb" / "offline-run-*"))
    # Each part has its own offline directory of the one run id; W&B adds "-1" to the second's
    # name when both parts started within the same second.
    named = re.compile(rf"offline-run-\d{{8}}_\d{{6}}-{re.escape(first_id)}(-\d+)?$")
    assert len(offline_runs) == 2 and all(named.search(p) for p in offline_runs), offline_runs

    records = _metrics(tmp_path / "run" / "metrics.jsonl")
    train = [r for r in records if "turn_1/reward_mean" in r]
    assert len(train) == 4 * 4  # 4 epochs x 4 rollout batches, none lost, none repeated
    steps = [r["step"] for r in train]
    assert steps == sorted(set(steps)) and steps == list(range(steps[0], steps[-1] + 1, 4))
    assert read_checkpoint_metadata(result["checkpoint"])["epoch"] == 4
