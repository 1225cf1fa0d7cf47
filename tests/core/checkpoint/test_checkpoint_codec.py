"""Unit tests of the checkpoint building blocks that need no model: the JSON codec, the
fingerprint diff, path resolution, the latest pointer, rotation and argument checks."""

from __future__ import annotations

import json
import math
import os
import random
from types import SimpleNamespace

import pytest

from comlrl.core.checkpoint.atomic import write_latest
from comlrl.core.checkpoint.codec import decode, dumps, encode, read_json
from comlrl.core.checkpoint.errors import (
    CheckpointError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
)
from comlrl.core.checkpoint.fingerprint import config_fingerprint, differences
from comlrl.core.checkpoint.layout import (
    MANIFEST,
    OWNER,
    checkpoint_name,
    parse_sequence,
    resolve_checkpoint,
)
from comlrl.core.checkpoint.rotation import owned_checkpoints, rotate
from comlrl.core.checkpoint.session import CheckpointSession


def test_codec_round_trips_tuples_floats_and_nested_data():
    rng = random.Random(5)
    state = {
        "rng": rng.getstate(),
        "pair": (1, (2.5, "x")),
        "floats": [0.1, 1e-300, -0.0, 1 / 3],
        "none": None,
        "nested": {"a": [True, False, {"b": ()}]},
    }
    back = decode(json.loads(dumps(state)))
    assert back == state
    assert isinstance(back["rng"], tuple) and isinstance(back["rng"][1], tuple)
    again = random.Random()
    again.setstate(back["rng"])
    assert again.random() == rng.random()


def test_codec_reads_numpy_scalars_as_numbers_and_refuses_tensors():
    import numpy as np
    import torch

    assert decode(json.loads(dumps({"a": np.float32(0.5), "b": np.int64(3)}))) == {"a": 0.5, "b": 3}
    with pytest.raises(TypeError, match="state.t: cannot checkpoint a Tensor"):
        encode({"t": torch.tensor(1.0)})


def test_codec_keeps_nan_and_inf():
    back = decode(json.loads(dumps({"x": float("nan"), "y": float("-inf")})))
    assert math.isnan(back["x"]) and back["y"] == float("-inf")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({1: "a"}, "keys must be strings"),
        ({"x": object()}, "cannot checkpoint"),
        ({"__tuple__": 1}, "reserved"),
    ],
)
def test_codec_refuses_what_would_not_round_trip(value, message):
    with pytest.raises(TypeError, match=message):
        encode(value)


def test_read_json_reports_damage_as_corrupt(tmp_path):
    path = tmp_path / "state.json"
    path.write_text('{"a": [1, 2', encoding="utf-8")
    with pytest.raises(CorruptCheckpointError, match="not valid JSON"):
        read_json(path)
    with pytest.raises(CorruptCheckpointError, match="missing"):
        read_json(tmp_path / "absent.json")


def test_differences_name_every_changed_field():
    saved = {"config": {"lr": 0.1, "k": 4, "gone": 1}, "models": {"agent_0": {"class": "A"}}}
    now = {"config": {"lr": 0.2, "k": 4, "new": 2}, "models": {"agent_0": {"class": "B"}}}
    lines = differences(saved, now)
    assert lines == [
        "config.gone: in the checkpoint (1), not now",
        "config.lr: 0.1 vs 0.2",
        "config.new: not in the checkpoint, now 2",
        'models.agent_0.class: "A" vs "B"',
    ]
    error = IncompatibleCheckpointError("/ckpt", lines)
    assert "config.lr: 0.1 vs 0.2" in str(error) and "4 difference(s)" in str(error)
    assert differences(saved, saved) == []


def test_config_fingerprint_skips_portable_fields():
    from dataclasses import dataclass

    @dataclass
    class Cfg:
        num_train_epochs: int = 3
        agent_devices: str = "cpu"
        logging_steps: int = 1
        learning_rate: float = 0.1

    assert config_fingerprint(Cfg()) == {"learning_rate": 0.1}


def _fake_checkpoint(directory, seq: int, run_id: str, complete: bool = True) -> str:
    path = os.path.join(directory, checkpoint_name(seq))
    os.makedirs(path)
    with open(os.path.join(path, OWNER), "w") as fh:
        json.dump({"run_id": run_id, "sequence": seq}, fh)
    if complete:
        with open(os.path.join(path, MANIFEST), "w") as fh:
            fh.write("{}")
    return path


def test_names_and_latest_pointer(tmp_path):
    assert parse_sequence(checkpoint_name(12)) == 12
    assert parse_sequence("checkpoint-x") is None
    ckpt = _fake_checkpoint(tmp_path, 3, "a" * 32)
    write_latest(str(tmp_path), "checkpoint-3")
    assert (tmp_path / "latest").read_text().strip() == "checkpoint-3"
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".latest")]
    assert resolve_checkpoint(tmp_path) == ckpt
    assert resolve_checkpoint(tmp_path / "latest") == ckpt
    assert resolve_checkpoint("latest", str(tmp_path)) == ckpt
    assert resolve_checkpoint(ckpt) == ckpt
    with pytest.raises(CheckpointError, match="does not exist"):
        resolve_checkpoint(tmp_path / "nope")
    with pytest.raises(ValueError, match="needs checkpoint_dir"):
        resolve_checkpoint("latest")
    (tmp_path / "latest").write_text("../../etc\n")
    with pytest.raises(CheckpointError, match="should name a checkpoint"):
        resolve_checkpoint(tmp_path)


def test_rotation_keeps_newest_of_this_run_and_spares_others_and_protected(tmp_path):
    mine, other = "a" * 32, "b" * 32
    paths = {s: _fake_checkpoint(tmp_path, s, mine) for s in (1, 2, 3, 4, 5)}
    foreign = _fake_checkpoint(tmp_path, 9, other)
    partial = _fake_checkpoint(tmp_path, 7, mine, complete=False)
    removed = rotate(str(tmp_path), mine, 2, protect={paths[2]})
    assert sorted(removed) == sorted([paths[1], paths[3]])
    assert [s for s, _ in owned_checkpoints(str(tmp_path), mine)] == [2, 4, 5]
    assert os.path.isdir(foreign) and os.path.isdir(partial)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".trash")]
    assert rotate(str(tmp_path), mine, None, set()) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"checkpoint_interval": 0}, "checkpoint_interval must be a positive integer"),
        ({"checkpoint_interval": True}, "checkpoint_interval"),
        (
            {"checkpoint_total_limit": 0},
            "checkpoint_total_limit must be a positive integer or None",
        ),
        ({"checkpoint_every_batches": 1.5}, "checkpoint_every_batches"),
    ],
)
def test_session_arguments_are_checked_first(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CheckpointSession(None, None, None, **kwargs)


def test_fresh_run_refuses_a_directory_with_checkpoints(tmp_path):
    _fake_checkpoint(tmp_path, 1, "c" * 32)
    main = SimpleNamespace(is_main=True)  # the process context: this one saves
    with pytest.raises(FileExistsError, match="already holds checkpoints"):
        CheckpointSession(main, None, str(tmp_path))
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        CheckpointSession(main, None, str(tmp_path / "file"))
