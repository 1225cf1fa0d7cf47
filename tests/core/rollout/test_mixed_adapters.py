"""Adapter agents of one base decode in mixed-adapter calls (comlrl.core.rollout.mixed_adapters):
each row through its own adapter, the same completions as decoding agent by agent."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("peft")

from transformers import (
    AutoModelForCausalLM,  # noqa: E402
    AutoTokenizer,  # noqa: E402
)

from comlrl.core.models.adapters import SharedBase  # noqa: E402
from comlrl.core.rollout import mixed_adapters  # noqa: E402
from comlrl.core.rollout.backends.hf import HFBackend  # noqa: E402
from comlrl.core.rollout.generation import SamplingParams  # noqa: E402
from comlrl.core.testing import tiny_model_dir  # noqa: E402

LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], "lora_dropout": 0.0}
PEFT = {**LORA, "peft_type": "LORA", "task_type": "CAUSAL_LM"}
PROMPTS = [["Once upon a time", "The sea"], ["A robot walked", "Winter came"], ["Hi", "Yes"]]


def _agents(n: int = 3):
    torch.manual_seed(0)
    shared = SharedBase(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir()),
        PEFT,
        [f"agent_{i}" for i in range(n)],
    )
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # distinct, non-zero adapters: a row through the wrong one shows
        for name, p in shared.model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return shared, shared.agents()


def _backend(agents, **kw):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir())
    return HFBackend(agents, [tok] * len(agents), **kw)


def _ids(samples):
    return [[s.completion_ids for s in agent] for agent in samples]


@pytest.mark.parametrize("per_call", [None, 2])
def test_greedy_mixed_decode_equals_agent_by_agent(per_call):
    shared, agents = _agents()
    greedy = SamplingParams(max_new_tokens=8, do_sample=False)
    shared.model.train()
    mixed = _backend(agents, max_sequences_per_call=per_call).generate_joint(PROMPTS, 1, greedy)
    single = _backend(agents, mixed_adapters=False)
    apart = [single.generate(i, p, 1, greedy) for i, p in enumerate(PROMPTS)]
    assert mixed is not None and shared.model.training  # decoded in eval mode, then restored
    assert _ids(mixed) == _ids(apart)
    assert [[s.texts for s in agent] for agent in mixed] == [
        [s.texts for s in agent] for agent in apart
    ]
    # The adapters differ, so the rows really went through different adapters.
    one_adapter = single.generate(0, PROMPTS[1], 1, greedy)
    assert [s.completion_ids for s in one_adapter] != _ids(apart)[1]


def test_sampling_is_one_call_for_every_agent(monkeypatch):
    shared, agents = _agents()
    calls = []
    real = shared.model.generate

    def counted(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(shared.model, "generate", counted)
    params = SamplingParams(max_new_tokens=6, temperature=1.0, top_p=1.0, top_k=None)
    out = _backend(agents).generate_joint(PROMPTS, 4, params)
    assert calls == [3 * 2 * 4]  # agents x prompts x K rows, one call
    assert [len(agent) for agent in out] == [2, 2, 2]
    assert all(len(s.completion_ids) == 4 for agent in out for s in agent)
    assert all(len(c) <= 6 for agent in out for s in agent for c in s.completion_ids)


def test_what_cannot_be_mixed_is_left_to_the_agent_by_agent_path():
    _, agents = _agents(2)
    params = SamplingParams(max_new_tokens=4)
    assert _backend(agents, mixed_adapters=False).generate_joint(PROMPTS[:2], 2, params) is None
    greedy = SamplingParams(max_new_tokens=4, do_sample=False)
    assert _backend(agents).generate_joint(PROMPTS[:2], 2, greedy) is None  # greedy copies
    other, _ = _agents(1)
    assert mixed_adapters.shared_adapters([agents[0], other.agent("agent_0")], [None]) is None
    plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir())
    assert _backend([plain, plain]).generate_joint(PROMPTS[:2], 2, params) is None


def test_a_trainer_of_adapter_agents_rolls_out_mixed(tmp_path, monkeypatch):
    from tests.core.checkpoint.test_checkpoint_helpers import make_trainer

    seen = []
    real = mixed_adapters.sample_mixed

    def spy(shared, names, *args, **kwargs):
        seen.append(list(names))
        return real(shared, names, *args, **kwargs)

    monkeypatch.setattr(mixed_adapters, "sample_mixed", spy)
    trainer = make_trainer(
        tmp_path,
        1,
        reward_func=lambda *c: [float(len(x)) for x in c[0]],
        agents=[tiny_model_dir()] * 2,
        peft_config=LORA,
    )
    trainer.train()
    assert seen and all(names == ["agent_0", "agent_1"] for names in seen)
    assert trainer.env_step > 0
