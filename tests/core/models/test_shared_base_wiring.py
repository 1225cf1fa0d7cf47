"""peft_config with agents of one base: the trainer loads one base with one adapter per agent,
the KL reference is that base with adapters disabled, save_model writes one adapter per agent,
and a resumed run equals an uninterrupted one."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("peft")

from comlrl.core.logprobs import token_logprobs  # noqa: E402
from comlrl.core.models.adapters import AdapterAgent, parameter_bytes  # noqa: E402
from comlrl.core.models.reference import reference_models_for  # noqa: E402
from comlrl.core.testing import tiny_model_dir  # noqa: E402
from tests.core.checkpoint.test_checkpoint_helpers import assert_same_state, make_trainer  # noqa: E402

LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], "lora_dropout": 0.0}


def _reward(*completions):
    return [float(len(c)) for c in completions[0]]


def _trainer(tmp_path, n: int, epochs: int = 1, **overrides):
    overrides.setdefault("peft_config", LORA)
    return make_trainer(
        tmp_path, epochs, reward_func=_reward, agents=[tiny_model_dir()] * n, **overrides
    )


def test_four_agents_of_one_name_hold_one_base(tmp_path):
    one = _trainer(tmp_path / "one", 1)
    four = _trainer(tmp_path / "four", 4, num_agents=4)
    assert all(isinstance(a, AdapterAgent) for a in four.agents)
    assert len({id(a.shared) for a in four.agents}) == 1
    assert parameter_bytes(four.agents) <= 1.3 * parameter_bytes(one.agents)


def test_each_optimizer_covers_only_its_adapter(tmp_path):
    trainer = _trainer(tmp_path, 2)
    trainer.train()
    for i, (agent, opt) in enumerate(zip(trainer.agents, trainer.optimizers)):
        ids = {id(p) for g in opt.param_groups for p in g["params"]}
        assert ids == {id(p) for p in agent.parameters()}
        assert all(f".agent_{i}." in n for n, _ in agent.named_parameters())


def test_reference_is_the_base_with_adapters_disabled(tmp_path):
    trainer = _trainer(tmp_path, 2, reference_kl_enabled=True)
    agents = trainer.agents
    with torch.no_grad():  # non-zero adapters, so agent and base differ
        for _, p in agents[0].named_parameters():
            p.add_(0.05)
    refs = reference_models_for(trainer)
    assert len(refs) == 2
    assert all(not any(p.requires_grad for p in r.parameters()) for r in refs)
    assert parameter_bytes(agents) == parameter_bytes(agents[:1])  # no reference copy
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir()).eval()
    prompts, comps = [[5, 6, 7, 8]], [[9, 10, 11]]
    want = token_logprobs(base, prompts, comps, pad_id=0).values
    for ref in refs:
        torch.testing.assert_close(token_logprobs(ref, prompts, comps, pad_id=0).values, want)
    policy = token_logprobs(agents[0], prompts, comps, pad_id=0).values
    assert not torch.allclose(policy, want)


def test_save_model_writes_one_adapter_per_agent_naming_the_base(tmp_path):
    trainer = _trainer(tmp_path, 3, num_agents=3)
    out = tmp_path / "agents"
    trainer.save_model(str(out))
    for i in range(3):
        config = out / f"agent_{i}" / "adapter_config.json"
        assert config.is_file()
        assert json.loads(config.read_text())["base_model_name_or_path"] == tiny_model_dir()


def test_resume_of_shared_base_adapters_equals_uninterrupted(tmp_path):
    reference = _trainer(tmp_path / "ref", 2, epochs=2)
    reference.train()
    first = _trainer(tmp_path / "run", 2, epochs=1)
    ckpt = str(tmp_path / "run" / "checkpoints")
    first.train(checkpoint_dir=ckpt)
    second = _trainer(tmp_path / "run", 2, epochs=2)
    second.train(resume_from_checkpoint="latest", checkpoint_dir=ckpt)
    assert_same_state(reference, second)
