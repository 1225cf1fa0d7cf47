"""What a crash leaves behind must never block the next run: ``latest`` missing or older than the
newest complete checkpoint, staging dirs without an owner file, another run's leftovers, an
older run's metrics log. And two processes never write into one checkpoint dir at once."""

from __future__ import annotations

import fcntl
import json
import os

import pytest

from comlrl.core.checkpoint.atomic import TEST_KILL_ENV, kill_point, write_latest
from comlrl.core.checkpoint.errors import CheckpointError
from comlrl.core.checkpoint.layout import MANIFEST, OWNER, resolve_checkpoint
from comlrl.core.checkpoint.reader import read_checkpoint_metadata
from tests.core.checkpoint.test_checkpoint_helpers import make_trainer, metrics

pytestmark = pytest.mark.xdist_group("test_checkpoint_crash")


def _fake(directory, seq: int, complete: bool = True) -> str:
    path = os.path.join(directory, f"checkpoint-{seq}")
    os.makedirs(path)
    with open(os.path.join(path, OWNER), "w") as fh:
        json.dump({"run_id": "a" * 32, "sequence": seq}, fh)
    if complete:
        with open(os.path.join(path, MANIFEST), "w") as fh:
            fh.write("{}")
    return path


def test_latest_falls_back_to_the_newest_complete_checkpoint(tmp_path):
    d = str(tmp_path)
    _fake(d, 1)
    second = _fake(d, 2)
    # Killed between publishing checkpoint-2 and writing the pointer: no pointer at all...
    for form in (d, "latest"):
        assert resolve_checkpoint(form, d) == second
    # ... or one that still names the previous checkpoint.
    write_latest(d, "checkpoint-1")
    assert resolve_checkpoint(d) == second
    assert resolve_checkpoint(tmp_path / "latest") == second
    assert resolve_checkpoint("latest", d) == second
    # A run dir whose checkpoints/ has no pointer resolves the same way.
    run = tmp_path / "run"
    os.makedirs(run / "checkpoints")
    third = _fake(str(run / "checkpoints"), 3)
    assert resolve_checkpoint(run) == third
    # An incomplete newer one (a staging dir that never got its manifest) is never chosen.
    _fake(d, 4, complete=False)
    assert resolve_checkpoint(d) == second
    # An explicitly named checkpoint is taken as it is.
    assert resolve_checkpoint(os.path.join(d, "checkpoint-1")) == os.path.join(d, "checkpoint-1")


def test_a_pointer_to_nothing_with_no_complete_checkpoint_is_an_error(tmp_path):
    d = str(tmp_path)
    write_latest(d, "checkpoint-5")
    with pytest.raises(CheckpointError, match="no other complete checkpoint"):
        resolve_checkpoint(d)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="no complete checkpoint"):
        resolve_checkpoint("latest", str(empty))


def test_resume_works_without_a_pointer(tmp_path):
    ckpt = tmp_path / "checkpoints"
    first = make_trainer(tmp_path, 1)
    first.train(checkpoint_dir=str(ckpt), checkpoint_every_batches=1)
    os.unlink(ckpt / "latest")  # killed right after publishing its first checkpoint's rename
    resumed = make_trainer(tmp_path, 2)
    resumed.train(resume_from_checkpoint="latest", checkpoint_dir=str(ckpt))
    assert resumed.run_state.last_checkpoint == str(ckpt / "checkpoint-4")
    assert read_checkpoint_metadata(str(ckpt))["epoch"] == 2


def _leftovers(ckpt) -> None:
    os.makedirs(ckpt / ".staging-checkpoint-1-killed")  # killed before its owner file
    (ckpt / ".staging-checkpoint-1-killed" / "model.safetensors").write_bytes(b"\0" * 64)
    os.makedirs(ckpt / ".trash-checkpoint-0-x" / "checkpoint-0")  # killed mid-rotation
    (ckpt / ".latest-tmp").write_text("checkpoint-0")  # killed while moving the pointer


def test_fresh_run_takes_over_a_dir_of_dead_saves_and_clears_them(tmp_path):
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    _leftovers(ckpt)
    trainer = make_trainer(tmp_path, 1)
    trainer.train(checkpoint_dir=str(ckpt))
    assert sorted(os.listdir(ckpt)) == ["checkpoint-1", "latest"]


def test_resume_clears_ownerless_staging_dirs(tmp_path):
    ckpt = tmp_path / "checkpoints"
    make_trainer(tmp_path, 1).train(checkpoint_dir=str(ckpt))
    _leftovers(ckpt)
    make_trainer(tmp_path, 2).train(resume_from_checkpoint="latest", checkpoint_dir=str(ckpt))
    assert not [n for n in os.listdir(ckpt) if n.startswith(".")]


def test_fresh_run_never_appends_to_an_older_runs_log(tmp_path):
    make_trainer(tmp_path, 1).train()  # killed before any checkpoint, as far as its log goes
    old = metrics(tmp_path)
    with pytest.warns(UserWarning, match="earlier run"):
        make_trainer(tmp_path, 1).train()
    fresh = metrics(tmp_path)
    assert fresh == old  # same seed: the same records, once, not appended after the old ones
    kept = tmp_path / "metrics.old-1.jsonl"
    assert [json.loads(line) for line in kept.read_text().splitlines()][0]["step"] == 0


def test_a_second_train_call_of_one_trainer_still_appends(tmp_path):
    trainer = make_trainer(tmp_path, 1)
    trainer.train()
    count = len(metrics(tmp_path))
    trainer.train()
    assert len(metrics(tmp_path)) > count
    assert not (tmp_path / "metrics.old-1.jsonl").exists()


def test_a_checkpoint_dir_in_use_by_another_process_is_refused(tmp_path):
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    fd = os.open(ckpt, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a live writer holds
        with pytest.raises(CheckpointError, match="in use by another running process"):
            make_trainer(tmp_path, 1).train(checkpoint_dir=str(ckpt))
    finally:
        os.close(fd)
    assert os.listdir(ckpt) == []
    make_trainer(tmp_path, 1).train(checkpoint_dir=str(ckpt))
    assert "checkpoint-1" in os.listdir(ckpt)


def test_kill_hook_names_its_stages(monkeypatch):
    monkeypatch.setenv(TEST_KILL_ENV, "halfway:1")
    with pytest.raises(ValueError, match="STAGE one of"):
        kill_point("staging")
