"""``model_config.share_parameters``: agents of one model name become one model object
(parameter sharing, what ``agents=[model, model]`` gives in Python), through the trainer and a
run file; without it the name loads once and is copied; a non-boolean value is one clear error."""

from __future__ import annotations

import pytest
import torch

from comlrl.core.errors import UserError
from comlrl.core.testing import tiny_model_dir
from comlrl.reinforce import MAGRPOTrainer
from tests.core.checkpoint.test_checkpoint_helpers import DATA, config


def _trainer(tmp_path, **model_config):
    return MAGRPOTrainer(
        agent_model=tiny_model_dir(),
        num_agents=2,
        model_config=model_config,
        train_dataset=DATA,
        reward_func=lambda *c: [float(len(x)) for x in c[0]],
        args=config(tmp_path, 1),
    )


def test_share_parameters_makes_one_model_object_with_separate_optimizers(tmp_path):
    trainer = _trainer(tmp_path, share_parameters=True)
    assert trainer.agents[0] is trainer.agents[1]
    assert trainer.optimizers[0] is not trainer.optimizers[1]
    before = [p.detach().clone() for p in trainer.agents[0].parameters()]
    trainer.train()
    moved = any(not torch.equal(a, p) for a, p in zip(before, trainer.agents[1].parameters()))
    assert moved  # both agents' updates land on the one set of weights


def test_without_it_a_repeated_name_is_copied(tmp_path):
    trainer = _trainer(tmp_path)
    assert trainer.agents[0] is not trainer.agents[1]
    first = next(trainer.agents[0].parameters())
    assert first.data_ptr() != next(trainer.agents[1].parameters()).data_ptr()


def test_a_non_boolean_value_names_the_field(tmp_path):
    with pytest.raises(UserError, match=r"model_config.share_parameters must be true or false"):
        _trainer(tmp_path, share_parameters="yes")


def test_share_parameters_with_adapters_is_refused_naming_both_fields(tmp_path):
    from peft import LoraConfig

    with pytest.raises(UserError, match=r"model_config.share_parameters=true with peft_config"):
        MAGRPOTrainer(
            agent_model=tiny_model_dir(),
            num_agents=2,
            model_config={"share_parameters": True},
            train_dataset=DATA,
            reward_func=lambda *c: [float(len(x)) for x in c[0]],
            args=config(tmp_path, 1, peft_config=LoraConfig(r=2, target_modules=["q_proj"])),
        )
