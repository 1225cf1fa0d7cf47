"""N agents on one base (comlrl.core.models.adapters): gradients equal separate per-agent runs,
and the parameters of 4 agents take at most 1.3x those of one."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("peft")

from peft import get_peft_model, set_peft_model_state_dict  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from comlrl.core.logprobs import token_logprobs  # noqa: E402
from comlrl.core.models.adapters import SharedBase, parameter_bytes  # noqa: E402
from comlrl.core.models.setup import build_peft_config  # noqa: E402
from comlrl.core.testing import build_config  # noqa: E402

LORA = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 4, "lora_alpha": 8,
        "target_modules": ["q_proj", "v_proj"], "lora_dropout": 0.0}  # fmt: skip


def _base(seed: int = 0):
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(build_config("qwen2", vocab_size=256)).eval()


def _randomize_adapters(model, seed: int) -> None:
    """LoRA's B starts at 0 (no gradient for A); random adapters make every gradient count."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_" in n:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)


def _rows(seed: int):
    gen = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(1, 256, (6,), generator=gen).tolist() for _ in range(4)]
    comps = [torch.randint(1, 256, (5,), generator=gen).tolist() for _ in range(4)]
    return prompts, comps


def _loss(model, seed: int):
    prompts, comps = _rows(seed)
    return (
        token_logprobs(model, prompts, comps, pad_id=0, grad=True, layout="padded")
        .sequence_sum()
        .sum()
    )


def test_each_adapters_gradients_equal_a_separate_run():
    names = ["agent_0", "agent_1", "agent_2"]
    shared = SharedBase(_base(), LORA, names)
    _randomize_adapters(shared.model, seed=5)
    agents = shared.agents()
    separate = []
    for a in agents:
        alone = get_peft_model(_base(), build_peft_config(LORA))
        set_peft_model_state_dict(alone, a.state_dict())
        separate.append(alone)
    # interleaved forwards, as agents' updates run: each backward must see its own adapter only
    losses = [_loss(a, seed=i) for i, a in enumerate(agents)]
    for loss in losses:
        loss.backward()
    for i, (a, alone) in enumerate(zip(agents, separate)):
        _loss(alone, seed=i).backward()
        mine = dict(a.named_parameters())
        assert mine and all(names[i] in n for n in mine)
        theirs = {n: p for n, p in alone.named_parameters() if p.requires_grad}
        assert len(theirs) == len(mine)
        for n, p in mine.items():
            q = theirs[n.replace(names[i], "default")]
            assert p.grad is not None and p.grad.abs().sum() > 0
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6)
    # the base is frozen and gets no gradient
    base = [p for n, p in shared.model.named_parameters() if "lora_" not in n]
    assert all(p.grad is None for p in base)


def test_an_optimizer_over_one_agent_changes_only_its_adapter():
    shared = SharedBase(_base(), LORA, ["agent_a", "agent_b"])
    _randomize_adapters(shared.model, seed=1)
    a, b = shared.agents()
    before = {n: p.detach().clone() for n, p in shared.model.named_parameters()}
    opt = torch.optim.SGD(a.parameters(), lr=0.1)
    _loss(a, seed=0).backward()
    opt.step()
    for n, p in shared.model.named_parameters():
        changed = not torch.equal(before[n], p)
        assert changed == (".agent_a." in n and "lora_" in n), n


def test_reference_is_the_base_with_adapters_disabled():
    base_copy = _base()
    shared = SharedBase(_base(), LORA, ["agent_a", "agent_b"])
    _randomize_adapters(shared.model, seed=2)
    a, _ = shared.agents()
    prompts, comps = _rows(0)
    with a.reference() as ref:
        got = token_logprobs(ref, prompts, comps, pad_id=0).sequence_sum()
    want = token_logprobs(base_copy, prompts, comps, pad_id=0).sequence_sum()
    torch.testing.assert_close(got, want)
    adapted = token_logprobs(a, prompts, comps, pad_id=0).sequence_sum()
    assert (adapted - want).abs().max() > 1e-4  # the adapter is back on after the reference


def test_four_agents_on_one_base_take_at_most_1_3x_the_parameters_of_one():
    one = SharedBase(_base(), LORA, ["agent_a"]).agents()
    four = SharedBase(_base(), LORA, ["agent_a", "agent_b", "agent_c", "agent_d"]).agents()
    separate = [get_peft_model(copy.deepcopy(_base()), build_peft_config(LORA)) for _ in range(4)]
    assert parameter_bytes(four) <= 1.3 * parameter_bytes(one)
    assert parameter_bytes(separate) >= 3.9 * parameter_bytes(one)  # what separate copies cost


def test_adapters_round_trip_through_state_dict():
    shared = SharedBase(_base(), LORA, ["agent_a", "agent_b"])
    _randomize_adapters(shared.model, seed=3)
    a, b = shared.agents()
    saved = {k: v.clone() for k, v in a.state_dict().items()}
    other = SharedBase(_base(), LORA, ["agent_a", "agent_b"]).agent("agent_a")
    other.load_state_dict(saved)
    for k, v in other.state_dict().items():
        torch.testing.assert_close(v, saved[k])
    with pytest.raises(ValueError, match="no adapter named"):
        shared.agent("agent_c")
