"""The vocabulary-sized weights' gradients written in place (core/logprobs/vocab_grads.py).

With the threshold lowered so a tiny model qualifies, the scored values must be those of the
autograd path and every parameter's gradient must equal it (float summation order aside), for
tied and untied heads, the padded, packed and shared-prompt layouts, pad ids with
``padding_idx``, accumulation over several backwards, gradients zeroed instead of freed, and
bf16 autocast. Where the path must not apply (small weights, frozen tables, scaled embeddings)
the engine keeps autograd's.
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from comlrl.core.logprobs import kernels, token_logprobs, vocab_grads
from comlrl.core.testing import build_config


def _model(tied: bool, seed: int = 0):
    torch.manual_seed(seed)
    config = build_config("qwen2", vocab_size=512)
    config.tie_word_embeddings = tied
    config.pad_token_id = 0
    model = AutoModelForCausalLM.from_config(config)
    if not tied:  # an untied head starts as its own tensor
        model.lm_head.weight.data = torch.randn_like(model.lm_head.weight) * 0.02
    return model.train()


def _rows(seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    ps, cs = [], []
    for i in range(3):
        p = torch.randint(1, 512, (4 + 2 * i,), generator=gen).tolist()
        for j in range(3):
            c = torch.randint(1, 512, (3 + (i + j) % 5,), generator=gen).tolist()
            c[0] = 0 if j == 1 else c[0]  # a pad id inside a completion: padding_idx's row
            ps.append(p)
            cs.append(c)
    return ps, cs


def _backward(model, layout, passes=1, temperature=0.7, zeroed=False):
    ps, cs = _rows()
    model.zero_grad(set_to_none=not zeroed)
    if zeroed:
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
    values = []
    for k in range(passes):
        lp = token_logprobs(
            model, ps, cs, pad_id=0, layout=layout, temperature=temperature, dedupe=False, grad=True
        )
        weights = torch.linspace(-1.0, 1.0 + k, len(ps))
        (weights * lp.sequence_sum()).sum().backward()
        values.append(lp.values.detach())
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return torch.stack(values), grads


def _compare(monkeypatch, tied, layout, **kwargs):
    reference = _backward(_model(tied), layout, **kwargs)
    monkeypatch.setattr(vocab_grads, "MIN_ELEMENTS", 0)
    sunk = _backward(_model(tied), layout, **kwargs)
    torch.testing.assert_close(sunk[0], reference[0], rtol=1e-5, atol=1e-6)
    assert sunk[1].keys() == reference[1].keys()
    for name, grad in reference[1].items():
        torch.testing.assert_close(sunk[1][name], grad, rtol=1e-4, atol=1e-6, msg=name)
    return reference


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("layout", ["padded", "packed", "shared_prompt"])
def test_values_and_gradients_equal_the_autograd_path(monkeypatch, tied, layout):
    _compare(monkeypatch, tied, layout)


def test_several_backwards_accumulate_into_grads_that_were_zeroed(monkeypatch):
    _compare(monkeypatch, True, "padded", passes=2, zeroed=True)


def test_small_head_chunks_sum_to_the_same_gradient(monkeypatch):
    monkeypatch.setattr(kernels, "HEAD_CHUNK_MIN_ELEMENTS", 3 * 512)
    monkeypatch.setattr(kernels, "HEAD_CHUNK_MAX_ELEMENTS", 3 * 512)
    _compare(monkeypatch, False, "padded")


def test_bf16_autocast_keeps_the_autograd_values_and_gradients(monkeypatch):
    def run():
        model = _model(True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return _backward(model, "padded")

    reference = run()
    monkeypatch.setattr(vocab_grads, "MIN_ELEMENTS", 0)
    sunk = run()
    torch.testing.assert_close(sunk[0], reference[0], rtol=1e-2, atol=1e-2)
    for name, grad in reference[1].items():
        # The in-place weight gradient is summed in fp32, autograd's in bf16: bf16 error apart.
        cos = torch.nn.functional.cosine_similarity(sunk[1][name].flatten(), grad.flatten(), 0)
        assert cos > 0.999, name


def test_small_or_frozen_or_scaled_tables_keep_autograd(monkeypatch):
    model = _model(True)
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    assert not vocab_grads.embedding_sinks(embedding)  # 512 x 64 < MIN_ELEMENTS
    assert not vocab_grads.head_sinks(head)
    monkeypatch.setattr(vocab_grads, "MIN_ELEMENTS", 0)
    assert vocab_grads.embedding_sinks(embedding) and vocab_grads.head_sinks(head)

    class Scaled(torch.nn.Embedding):
        def forward(self, ids):
            return super().forward(ids) * 2.0

    assert not vocab_grads.embedding_sinks(Scaled(512, 64))
    assert not vocab_grads.embedding_sinks(torch.nn.Embedding(512, 64, max_norm=1.0))
    embedding.weight.requires_grad_(False)  # a frozen table (adapters): no gradient at all
    _, grads = _backward(model, "padded")
    assert "model.embed_tokens.weight" not in grads
