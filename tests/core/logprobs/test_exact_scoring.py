"""Audit-3 findings F2-F5: each ratio, KL and margin compares two scorings of one precision
and without dropout, and adapters on one shared base stay exact under gradient checkpointing.
Every test here failed before its fix."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM

from comlrl.ac.critic_models import ValueHead
from comlrl.core.logprobs import sequence_logprobs, token_logprobs_parts
from comlrl.core.logprobs.values import estimate_values, last_token_values
from comlrl.core.models.backbone import backbone_of
from comlrl.core.models.setup import check_peft_config, enable_gradient_checkpointing, share_or_wrap
from comlrl.core.placement.devices import AgentWorkers
from comlrl.core.rollout.record import RolloutGroup, attach_logprobs
from comlrl.core.testing import hub_model_dir
from comlrl.core.training.dropout import dropout_off
from comlrl.core.training.precision import compute_context

LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}
PROMPTS = [[5, 17, 33, 40, 9], [7, 8, 9]]
COMPLETIONS = [[60, 61, 62, 63, 0], [70, 71, 72, 0]]


@pytest.fixture(scope="module")
def path() -> str:
    return hub_model_dir(arch="qwen2")


def _model(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def _adapters(path, count=2, **lora):
    base = _model(path)
    views = share_or_wrap([base] * count, check_peft_config("peft_config", {**LORA, **lora}), 0)
    g = torch.Generator().manual_seed(3)
    for n, p in views[0].shared.model.named_parameters():
        if "lora_B" in n:  # adapters after some training: unequal, non-zero
            p.data = torch.randn(p.shape, generator=g) * 0.2
    return views


def test_f3_rollout_log_probs_are_taken_in_the_update_precision(path):
    model = _model(path)
    args = SimpleNamespace(bf16=True, temperature=0.6, logprob_max_tokens=None)
    trainer = SimpleNamespace(
        args=args,
        agents=[model],
        tokenizers=[SimpleNamespace(pad_token_id=0)],
        workers=AgentWorkers(1, enabled=False),
    )
    groups = [RolloutGroup(0, 0, 0, p, [c], [0.0]) for p, c in zip(PROMPTS, COMPLETIONS)]
    attach_logprobs(trainer, [groups], old=True, reference=False, layout="padded")
    with compute_context(args, "cpu"):  # the update's forward (train_step)
        ((idx, new),) = list(
            token_logprobs_parts(
                model, PROMPTS, COMPLETIONS, pad_id=0, temperature=0.6, layout="padded"
            )
        )
    for row, j in enumerate(list(idx)):
        old = torch.tensor(groups[j].old_logps[0])
        assert (new.values[row, : len(old)].detach() - old).abs().max() <= 1e-6


def test_f3_a_critics_rollout_estimate_is_in_the_update_precision(path):
    body = backbone_of(_model(path))
    head = ValueHead(body.config.hidden_size)
    rows = [p + c for p, c in zip(PROMPTS, COMPLETIONS)]
    args = SimpleNamespace(bf16=True)
    old = estimate_values(body, head, rows, 0, None, args)
    with compute_context(args, "cpu"), torch.no_grad():  # the critic's regression step
        new = last_token_values(body, head, rows, 0)
    assert torch.tensor(old).sub(new.float()).abs().max() <= 1e-6


def test_f4_dropout_off_reaches_the_adapters_of_a_shared_base(path):
    agent = _adapters(path, lora_dropout=0.5)[0]
    agent.train()
    with dropout_off(agent), torch.no_grad():
        first = sequence_logprobs(agent, PROMPTS, COMPLETIONS, pad_id=0, layout="padded")
        second = sequence_logprobs(agent, PROMPTS, COMPLETIONS, pad_id=0, layout="padded")
    assert torch.equal(first, second)
    assert agent.shared.model.training  # the mode is untouched


def _agent0_grad(path, checkpointing: bool, joint: bool) -> torch.Tensor:
    a0, a1 = _adapters(path)
    if checkpointing:
        enable_gradient_checkpointing([a0, a1])
    a0.train()
    loss = sequence_logprobs(a0, PROMPTS, COMPLETIONS, pad_id=0, grad=True, layout="padded").sum()
    if joint:  # another agent's forward before the one backward (MADPO's joint backward)
        loss = (
            loss
            + sequence_logprobs(
                a1, PROMPTS, COMPLETIONS, pad_id=0, grad=True, layout="padded"
            ).sum()
        )
    loss.backward()
    return torch.cat([p.grad.flatten() for p in a0.parameters()])


def test_f2_a_joint_backward_under_checkpointing_gives_each_adapter_its_own_gradient(path):
    want = _agent0_grad(path, checkpointing=False, joint=False)
    got = _agent0_grad(path, checkpointing=True, joint=True)
    cosine = torch.nn.functional.cosine_similarity(got, want, dim=0)
    assert cosine >= 0.9999
    assert (got - want).norm() <= 1e-4 * want.norm()


@pytest.mark.parametrize("init", ["pissa", "olora", False])
def test_f5_residual_lora_inits_are_refused_on_a_shared_base(path, init):
    cfg = check_peft_config("peft_config", {**LORA, "init_lora_weights": init})
    with pytest.raises(ValueError, match=r"peft_config\.init_lora_weights"):
        share_or_wrap([_model(path)] * 2, cfg, 0)


def test_f5_the_zero_update_inits_keep_every_agent_at_the_loaded_model(path):
    ids = torch.tensor([PROMPTS[0] + COMPLETIONS[0]])
    with torch.no_grad():
        want = _model(path)(input_ids=ids).logits
        for init in (True, "gaussian"):
            cfg = check_peft_config("peft_config", {**LORA, "init_lora_weights": init})
            for agent in share_or_wrap([_model(path)] * 2, cfg, 0):
                assert torch.equal(agent(input_ids=ids).logits, want)
