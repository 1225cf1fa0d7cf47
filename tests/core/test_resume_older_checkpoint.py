"""A checkpoint written before a config field existed resumes when the field has the value it
trained with, and names the field when it does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from comlrl.core.checkpoint.errors import IncompatibleCheckpointError
from comlrl.core.checkpoint.fingerprint import PREDATING_VALUES, with_predating_fields
from comlrl.core.checkpoint.layout import list_checkpoints
from tests.reinforce.helpers import make_trainer

NEWER = ("shuffle_dataset", "min_p", "repetition_penalty", "max_prompt_length", "bf16")


def _older_checkpoint(tmp_path):
    """A checkpoint of a run that never shuffled, with the newer fields cut from its manifest."""
    trainer = make_trainer(tmp_path / "a", shuffle_dataset=False, num_train_epochs=1)
    trainer.train(checkpoint_dir=str(tmp_path / "ckpt"))
    path = list_checkpoints(str(tmp_path / "ckpt"))[-1][1]
    manifest_file = Path(path) / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    for name in NEWER:
        del manifest["fingerprint"]["config"][name]
    manifest_file.write_text(json.dumps(manifest))
    return path


def test_an_older_checkpoint_resumes_with_the_values_it_trained_with(tmp_path):
    path = _older_checkpoint(tmp_path)
    again = make_trainer(tmp_path / "a", shuffle_dataset=False, num_train_epochs=2)
    again.train(resume_from_checkpoint=path)
    assert again.cursor == (2, 0)


def test_another_value_is_named_as_a_difference(tmp_path):
    path = _older_checkpoint(tmp_path)
    again = make_trainer(tmp_path / "a", num_train_epochs=2)  # shuffle_dataset defaults to True
    with pytest.raises(IncompatibleCheckpointError, match="config.shuffle_dataset: false vs true"):
        again.train(resume_from_checkpoint=path)


def test_only_missing_fields_the_config_has_are_filled():
    saved = {"config": {"shuffle_dataset": True, "lr": 1}}
    now = {"config": {name: None for name in PREDATING_VALUES if name != "policy_loss"}}
    filled = with_predating_fields(saved, now)["config"]
    assert filled["shuffle_dataset"] is True and filled["lr"] == 1
    assert "policy_loss" not in filled  # MADPO has no such field
    assert set(PREDATING_VALUES) - {"policy_loss"} <= set(filled)
    assert with_predating_fields({"models": {}}, now) == {"models": {}}


def test_class_paths_of_moved_modules_match_their_new_homes():
    from comlrl.core.checkpoint.fingerprint import differences, with_moved_classes

    now = {
        "models": {"agent_0": {"class": "comlrl.core.models.adapters.AdapterAgent"}},
        "schedulers": ["torch.optim.lr_scheduler.LambdaLR"],
        "trainer": "comlrl.reinforce.magrpo.MAGRPOTrainer",
    }
    before_the_move = {
        "models": {"agent_0": {"class": "comlrl.core.adapters.AdapterAgent"}},
        "schedulers": ["torch.optim.lr_scheduler.LambdaLR"],
        "trainer": "comlrl.reinforce.magrpo.MAGRPOTrainer",
    }
    assert differences(before_the_move, now)  # as written, the class path differs
    assert differences(with_moved_classes(before_the_move), now) == []
    # a class that really changed is still named
    other = {**before_the_move, "models": {"agent_0": {"class": "comlrl.core.adapters.Other"}}}
    assert differences(with_moved_classes(other), now) == [
        'models.agent_0.class: "comlrl.core.models.adapters.Other" vs '
        '"comlrl.core.models.adapters.AdapterAgent"'
    ]
