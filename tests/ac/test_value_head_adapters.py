"""A value head on adapter agents reads the hidden states of the body under that agent's own
adapter (not the LM's logits, not another agent's adapter), and IAC trains with it."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("peft")

from comlrl.ac import IACConfig, IACTrainer  # noqa: E402
from comlrl.core.models.backbone import backbone_of, hidden_size_of  # noqa: E402
from comlrl.core.testing import tiny_model_dir  # noqa: E402

from .helpers import config, length_reward  # noqa: E402

LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], "lora_dropout": 0.0}


def _trainer(n=2):
    from datasets import Dataset

    return IACTrainer(
        agents=[tiny_model_dir()] * n,
        reward_func=length_reward,
        args=config(IACConfig, use_separate_critic=False, peft_config=LORA, num_agents=n),
        train_dataset=Dataset.from_list([{"prompt": "ab"}, {"prompt": "cd"}]),
    )


def _last_hidden(model, ids):
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
    return out.hidden_states[-1]


def test_body_of_each_adapter_agent_runs_under_its_own_adapter():
    trainer = _trainer()
    a0, a1 = trainer.agents
    with torch.no_grad():  # make the adapters differ, so a wrong one shows
        for _, p in a0.named_parameters():
            p.add_(0.05)
    ids = torch.tensor([[5, 6, 7, 8]])
    for agent in (a0, a1):
        body = backbone_of(agent)
        assert hidden_size_of(body) == trainer.value_heads[0].net.in_features
        with torch.no_grad():
            got = body(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
            torch.testing.assert_close(got, _last_hidden(agent, ids))
    with torch.no_grad():
        h0 = backbone_of(a0)(input_ids=ids).last_hidden_state
        h1 = backbone_of(a1)(input_ids=ids).last_hidden_state
    assert not torch.allclose(h0, h1)
    assert not any(".agent_" in n for n, _ in backbone_of(a0).named_parameters())


def test_body_of_a_single_peft_model_is_its_transformer_body():
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir()),
        LoraConfig(r=4, target_modules=["q_proj", "v_proj"]),
    )
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        got = backbone_of(model)(input_ids=ids).last_hidden_state
        torch.testing.assert_close(got, _last_hidden(model, ids))


def test_iac_value_heads_train_on_adapter_agents():
    trainer = _trainer()
    before = [h.net.weight.detach().clone() for h in trainer.value_heads]
    trainer.train()
    for head, w in zip(trainer.value_heads, before):
        assert not torch.equal(head.net.weight, w)
