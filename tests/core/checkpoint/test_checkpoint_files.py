"""What a checkpoint holds on disk, and how damaged or mismatched checkpoints are refused."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from comlrl.core.checkpoint.errors import (
    CheckpointError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
)
from comlrl.core.checkpoint.layout import list_checkpoints
from comlrl.core.checkpoint.reader import CheckpointReader, read_checkpoint_metadata
from comlrl.core.testing import tiny_model_dir
from tests.core.checkpoint.test_checkpoint_helpers import make_trainer

# One worker runs the whole module, so the module fixture is built once.
pytestmark = pytest.mark.xdist_group("test_checkpoint_files")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One 3-epoch run with a checkpoint per epoch, keeping the newest two."""
    run_dir = tmp_path_factory.mktemp("trained")
    ckpt_dir = run_dir / "checkpoints"
    trainer = make_trainer(run_dir, 3)
    trainer.train(checkpoint_dir=str(ckpt_dir), checkpoint_total_limit=2)
    return trainer, run_dir, ckpt_dir


def test_rotation_keeps_exactly_the_limit(trained):
    _, _, ckpt_dir = trained
    assert [seq for seq, _ in list_checkpoints(str(ckpt_dir))] == [2, 3]
    assert (ckpt_dir / "latest").read_text().strip() == "checkpoint-3"
    assert not [n for n in os.listdir(ckpt_dir) if n.startswith(".")]


def test_layout_is_safetensors_and_json_only(trained):
    trainer, run_dir, ckpt_dir = trained
    ckpt = ckpt_dir / "checkpoint-3"
    files = sorted(
        os.path.relpath(os.path.join(d, f), ckpt) for d, _, fs in os.walk(ckpt) for f in fs
    )
    assert {os.path.splitext(f)[1] for f in files} == {".json", ".safetensors"}
    for expected in (
        "manifest.json",
        "owner.json",
        "state.json",
        "rng.safetensors",
        "models/agent_0/model.safetensors",
        "models/agent_1/tokenizer.json",
        "optimizers/optimizer_1.safetensors",
    ):
        assert expected in files
    meta = read_checkpoint_metadata(str(ckpt_dir))
    assert meta["epoch"] == 3 and meta["position"] == 0 and meta["run_dir"] == str(run_dir)
    state = json.loads((ckpt / "state.json").read_text())
    assert state["loop"]["run"]["environment_steps"] == trainer.env_step
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    # the final evaluation comes after the last checkpoint: every record but that one is in it
    # (an eval record also carries the monitors' train/eval gap)
    final = json.loads(lines[-1])
    assert all(key.startswith(("eval/", "monitors/")) or key == "step" for key in final)
    assert state["logger"]["records"] == len(lines) - 1


def test_checkpoint_model_dir_loads_with_from_pretrained(trained):
    trainer, _, ckpt_dir = trained
    model_dir = ckpt_dir / "checkpoint-3" / "models" / "agent_1"
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    for (name, a), b in zip(trainer.agents[1].state_dict().items(), model.state_dict().values()):
        assert torch.equal(a, b), name
    assert tokenizer.get_vocab() == trainer.tokenizers[1].get_vocab()


def _copy(ckpt_dir, tmp_path):
    target = tmp_path / "checkpoint-3"
    shutil.copytree(ckpt_dir / "checkpoint-3", target)
    return target


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("truncate_weights", "truncated"),
        ("flip_optimizer_byte", "corrupted"),
        ("break_state_json", "corrupted"),
        ("break_manifest", "not valid JSON"),
        ("drop_manifest", "incomplete checkpoint"),
        ("drop_rng", "missing"),
    ],
)
def test_damaged_checkpoint_gets_a_clear_error(trained, tmp_path, damage, message):
    _, _, ckpt_dir = trained
    ckpt = _copy(ckpt_dir, tmp_path)
    if damage == "truncate_weights":
        path = ckpt / "models" / "agent_0" / "model.safetensors"
        path.write_bytes(path.read_bytes()[:1000])
    elif damage == "flip_optimizer_byte":
        path = ckpt / "optimizers" / "optimizer_0.safetensors"
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "break_state_json":  # same size, other bytes
        path = ckpt / "state.json"
        path.write_bytes(b"[" + path.read_bytes()[1:])
    elif damage == "break_manifest":
        path = ckpt / "manifest.json"
        path.write_text(path.read_text()[:-40])
    elif damage == "drop_manifest":
        (ckpt / "manifest.json").unlink()
    else:
        (ckpt / "rng.safetensors").unlink()
    with pytest.raises(CorruptCheckpointError, match=message):
        CheckpointReader(str(ckpt))


def test_resume_from_a_damaged_checkpoint_changes_nothing(trained, tmp_path):
    _, _, ckpt_dir = trained
    ckpt = _copy(ckpt_dir, tmp_path)
    path = ckpt / "models" / "agent_1" / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-8])
    trainer = make_trainer(tmp_path / "run", 4)
    before = [p.detach().clone() for p in trainer.agents[1].parameters()]
    with pytest.raises(CheckpointError, match="agent_1/model.safetensors"):
        trainer.train(resume_from_checkpoint=str(ckpt))
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.agents[1].parameters()))


def test_incompatible_config_lists_every_difference(trained, tmp_path):
    _, run_dir, ckpt_dir = trained
    trainer = make_trainer(run_dir, 4, agent_learning_rate=5e-4, num_generations=3)
    with pytest.raises(IncompatibleCheckpointError) as info:
        trainer.train(resume_from_checkpoint=str(ckpt_dir / "latest"))
    text = str(info.value)
    assert "config.agent_learning_rate: 0.001 vs 0.0005" in text
    assert "config.num_generations: 2 vs 3" in text
    assert len(info.value.differences) == 2


def test_other_models_are_refused_with_their_differences(trained, tmp_path):
    _, run_dir, ckpt_dir = trained
    llama = tiny_model_dir(arch="llama", pretrain_steps=0)
    trainer = make_trainer(run_dir, 4, agents=[llama, llama])
    with pytest.raises(IncompatibleCheckpointError) as info:
        trainer.train(resume_from_checkpoint=str(ckpt_dir))
    text = str(info.value)
    assert "models.agent_0.class" in text and "LlamaForCausalLM" in text
    assert "models.agent_1.config.model_type" in text


def test_too_few_epochs_for_the_cursor(trained):
    _, run_dir, ckpt_dir = trained
    trainer = make_trainer(run_dir, 2)
    with pytest.raises(IncompatibleCheckpointError, match="finished 3 epochs"):
        trainer.train(resume_from_checkpoint=str(ckpt_dir))


def test_foreign_metrics_log_is_refused(trained, tmp_path):
    _, _, ckpt_dir = trained
    other = tmp_path / "other"
    other.mkdir()
    (other / "metrics.jsonl").write_text('{"step": 1, "x": 1}\n')
    trainer = make_trainer(other, 4)
    with pytest.raises(IncompatibleCheckpointError, match="metrics.jsonl holds 1 records"):
        trainer.train(resume_from_checkpoint=str(ckpt_dir))


def test_reference_models_are_recorded_by_source_and_hash(tmp_path):
    trainer = make_trainer(tmp_path, 1, reference_kl_enabled=True)
    trainer.train(checkpoint_dir=str(tmp_path / "ckpt"))
    reader = CheckpointReader(read_checkpoint_metadata(str(tmp_path / "ckpt"))["path"])
    refs = reader.manifest["fingerprint"]["references"]
    assert [r["source"] for r in refs] == [tiny_model_dir()] * 2
    assert len({r["sha256"] for r in refs}) == 1 and len(refs[0]["sha256"]) == 64
    weights = [f for f in reader.manifest["files"] if f.endswith(".safetensors")]
    assert sorted(weights) == [
        "models/agent_0/model.safetensors",
        "models/agent_1/model.safetensors",
        "optimizers/optimizer_0.safetensors",
        "optimizers/optimizer_1.safetensors",
        "rng.safetensors",
    ]
    # A different reference (here: a trained one) is refused by its hash.
    resumed = make_trainer(tmp_path, 2, reference_kl_enabled=True)
    with torch.no_grad():
        resumed.reference_models[0].lm_head.weight.add_(0.5)
    with pytest.raises(IncompatibleCheckpointError, match=r"references\[0\]|references"):
        resumed.train(resume_from_checkpoint=str(tmp_path / "ckpt"))


def test_resume_never_unpickles(trained, monkeypatch):
    import pickle

    trainer, run_dir, ckpt_dir = trained

    def refuse(*args, **kwargs):
        raise AssertionError("a checkpoint load must not unpickle anything")

    resumed = make_trainer(run_dir, 3)
    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    resumed.train(resume_from_checkpoint=str(ckpt_dir))  # already at epoch 3: restore only
    for a, b in zip(trainer.agents, resumed.agents):
        assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    for a, b in zip(trainer.optimizers, resumed.optimizers):
        assert a.state_dict()["param_groups"] == b.state_dict()["param_groups"]
    assert resumed.env_step == trainer.env_step
