"""Token entropy from the log-prob engine: inside ``measuring_entropy`` every layout and path
(no gradient, checkpointed head chunks, the in-place vocabulary gradients, whole logits) returns
each scored token's entropy of the tempered distribution, equal to the entropy of the whole
logits, without changing the log-probs or their gradients."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from comlrl.core.logprobs import (
    kernels,
    measuring_entropy,
    token_logprobs,
    token_logprobs_parts,
    vocab_grads,
)
from comlrl.core.testing import build_config

VOCAB = 512


def _model(seed: int = 0):
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(build_config("qwen2", vocab_size=VOCAB)).eval()


def _rows():
    gen = torch.Generator().manual_seed(3)
    prompts, comps = [], []
    for i in range(3):
        p = torch.randint(1, VOCAB, (4 + i,), generator=gen).tolist()
        for j in range(3):
            prompts.append(p)
            comps.append(torch.randint(1, VOCAB, (2 + (i + j) % 4,), generator=gen).tolist())
    return prompts, comps


def _expected(model, prompts, comps, temperature):
    """Each row alone, its whole logits' entropy per completion token."""
    out = []
    with torch.no_grad():
        for p, c in zip(prompts, comps):
            logits = model(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1 : -1].float()
            logp = torch.log_softmax(logits / temperature, -1)
            out.append(-(logp.exp() * logp).sum(-1))
    return out


def _check(lp, expected):
    assert lp.entropy is not None and lp.entropy.shape == lp.values.shape
    assert not lp.entropy.requires_grad
    for r, want in enumerate(expected):
        n = len(want)
        torch.testing.assert_close(lp.entropy[r, :n], want, rtol=1e-4, atol=1e-5)
        assert torch.all(lp.entropy[r, n:] == 0)


@pytest.mark.parametrize("whole_logits", [False, True])
@pytest.mark.parametrize("layout", ["padded", "packed", "shared_prompt"])
def test_entropy_equals_the_whole_logits_entropy_in_every_layout(monkeypatch, layout, whole_logits):
    model, (prompts, comps) = _model(), _rows()
    if whole_logits:  # a model whose logits are not head(hidden) keeps its own logits
        monkeypatch.setattr(kernels, "head_split", lambda model: None)
    kw = dict(pad_id=0, layout=layout, temperature=0.7, dedupe=False)
    with measuring_entropy():
        lp = token_logprobs(model, prompts, comps, **kw)
    _check(lp, _expected(model, prompts, comps, 0.7))
    plain = token_logprobs(model, prompts, comps, **kw)
    assert plain.entropy is None
    torch.testing.assert_close(lp.values, plain.values)


@pytest.mark.parametrize("sink_vocab_grads", [False, True])
def test_gradient_passes_measure_entropy_and_keep_their_gradients(monkeypatch, sink_vocab_grads):
    """Small head chunks with gradients: the checkpointed path and, with the vocabulary
    weights' in-place gradients, the custom autograd path."""
    monkeypatch.setattr(kernels, "HEAD_CHUNK_MIN_ELEMENTS", 3 * VOCAB)
    monkeypatch.setattr(kernels, "HEAD_CHUNK_MAX_ELEMENTS", 3 * VOCAB)
    if sink_vocab_grads:
        monkeypatch.setattr(vocab_grads, "MIN_ELEMENTS", 0)
    prompts, comps = _rows()

    def backward(measure: bool):
        model = _model()
        model.zero_grad()
        entropies = []
        with measuring_entropy(measure):
            for idx, lp in token_logprobs_parts(
                model, prompts, comps, pad_id=0, layout="padded", dedupe=False
            ):
                lp.sequence_sum().sum().backward()
                entropies.append((idx, lp.entropy))
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        return model, entropies, grads

    model, entropies, grads = backward(True)
    _, plain, plain_grads = backward(False)
    torch.testing.assert_close(grads, plain_grads, rtol=1e-5, atol=1e-6)
    assert all(e is None for _, e in plain)
    expected = _expected(model.eval(), prompts, comps, 1.0)
    for idx, ent in entropies:
        for row, i in enumerate(idx):
            n = len(comps[i])
            torch.testing.assert_close(ent[row, :n], expected[i], rtol=1e-3, atol=1e-4)


def test_deduped_rows_share_their_entropy():
    model, (prompts, comps) = _model(), _rows()
    prompts, comps = prompts + prompts[:2], comps + comps[:2]
    with measuring_entropy():
        lp = token_logprobs(model, prompts, comps, pad_id=0)
    torch.testing.assert_close(lp.entropy[-2:], lp.entropy[:2])


def test_measuring_is_scoped_to_the_block():
    assert not kernels.entropy_wanted()
    with measuring_entropy():
        assert kernels.entropy_wanted()
        with measuring_entropy(False):
            assert not kernels.entropy_wanted()
        assert kernels.entropy_wanted()
    assert not kernels.entropy_wanted()
