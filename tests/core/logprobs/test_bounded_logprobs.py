"""The log-prob engine's memory bound: no forward materializes [rows, tokens, vocab] logits.

Values and gradients must equal the unchunked computation (the model's whole logits through one
log-softmax) within float tolerance, for every layout, with gradient checkpointing on, and for
models whose logits are not simply head(hidden) (they keep their own logits).
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2ForCausalLM

from comlrl.core.logprobs import kernels, token_logprobs
from comlrl.core.models.setup import enable_gradient_checkpointing
from comlrl.core.testing import build_config


def _model(vocab: int = 512, seed: int = 0, cls=AutoModelForCausalLM):
    torch.manual_seed(seed)
    config = build_config("qwen2", vocab_size=vocab)
    model = cls.from_config(config) if cls is AutoModelForCausalLM else cls(config)
    return model.eval()


def _rows(vocab: int, prompts: int = 3, k: int = 4, seed: int = 1, extra: int = 0):
    gen = torch.Generator().manual_seed(seed)
    ps, cs = [], []
    for i in range(prompts):
        p = torch.randint(1, vocab, (5 + 2 * i,), generator=gen).tolist()
        for j in range(k):
            ps.append(p)
            cs.append(torch.randint(1, vocab, (3 + extra + (i + j) % 6,), generator=gen).tolist())
    return ps, cs


def _unchunked(model, prompts, comps, temperature):
    """Reference: each row alone, its whole logits, one log-softmax."""
    rows = []
    for p, c in zip(prompts, comps):
        logits = model(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1 : -1].float()
        lp = torch.log_softmax(logits / temperature, -1).gather(-1, torch.tensor(c)[:, None])
        rows.append(lp[:, 0].sum())
    return torch.stack(rows)


def _grads(model):
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


@pytest.fixture
def small_chunks(monkeypatch):
    """Five positions per head chunk, so every test forward is split into many chunks."""
    monkeypatch.setattr(kernels, "HEAD_CHUNK_MIN_ELEMENTS", 5 * 512)
    monkeypatch.setattr(kernels, "HEAD_CHUNK_MAX_ELEMENTS", 5 * 512)
    assert kernels.head_chunk_tokens(512, 64) == 5


def test_default_chunk_follows_the_head_size_within_bounds():
    assert kernels.head_chunk_tokens(151936, 896) == 2**26 // 151936 == 441
    assert kernels.head_chunk_tokens(512, 64) == 2**22 // 512
    # between the bounds the chunk's logits hold as many elements as the head has weights
    assert kernels.head_chunk_tokens(65536, 128) == 128
    with pytest.raises(ValueError, match="vocab_size"):
        kernels.head_chunk_tokens(0, 64)


def test_standard_models_score_through_their_head():
    model = _model()
    assert kernels.head_split(model) is model.get_output_embeddings()


@pytest.mark.parametrize("layout", ["padded", "packed", "shared_prompt"])
def test_chunked_values_and_gradients_equal_the_unchunked_ones(layout, small_chunks):
    model = _model()
    prompts, comps = _rows(512)
    adv = torch.linspace(-1, 1, len(prompts))
    lp = token_logprobs(model, prompts, comps, pad_id=0, grad=True, layout=layout, temperature=0.7)
    (adv * lp.sequence_sum()).sum().backward()
    got, got_grads = lp.sequence_sum().detach(), _grads(model)
    model.zero_grad(set_to_none=True)
    ref = _unchunked(model, prompts, comps, 0.7)
    (adv * ref).sum().backward()
    torch.testing.assert_close(got, ref.detach(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got_grads, _grads(model), rtol=1e-3, atol=1e-5)
    assert (lp.values * (1 - lp.mask)).abs().sum() == 0  # pads are never scored


def test_gradient_checkpointing_composes(small_chunks):
    model = _model()
    enable_gradient_checkpointing([model])  # as a run with gradient_checkpointing=True does
    checkpointed = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False)]
    assert checkpointed
    prompts, comps = _rows(512)
    # dropout is 0 in these configs, so train mode (checkpointing on) and eval score alike
    model.train()
    lp = token_logprobs(model, prompts, comps, pad_id=0, grad=True)
    lp.sequence_sum().sum().backward()
    got = _grads(model)
    model.zero_grad(set_to_none=True)
    model.eval()
    _unchunked(model, prompts, comps, 1.0).sum().backward()
    torch.testing.assert_close(got, _grads(model), rtol=1e-3, atol=1e-5)


def test_no_forward_or_backward_holds_a_whole_buffer_of_logits():
    """Every output of every module, in the forward and in the chunks recomputed in backward,
    stays within one default chunk of logits, far below rows x tokens x vocab."""
    vocab = 32768
    model = _model(vocab)
    model.train()
    prompts, comps = _rows(vocab, prompts=4, k=8, extra=20)
    chunk = kernels.head_chunk_tokens(vocab, 64)
    scored = sum(len(c) for c in comps)
    assert scored > 2 * chunk  # several chunks, so the bound below means something
    largest = [0]

    def record(_module, _args, output):
        tensors = output if isinstance(output, tuple) else (output,)
        for t in tensors:
            if isinstance(t, torch.Tensor):
                largest[0] = max(largest[0], t.numel())
            elif hasattr(t, "logits") and t.logits is not None:
                largest[0] = max(largest[0], t.logits.numel())

    hooks = [m.register_forward_hook(record) for m in model.modules()]
    try:
        lp = token_logprobs(
            model, prompts, comps, pad_id=0, grad=True, layout="padded", temperature=0.6
        )
        lp.sequence_sum().sum().backward()
    finally:
        for h in hooks:
            h.remove()
    assert largest[0] <= chunk * vocab
    assert largest[0] < scored * vocab / 2
    assert next(model.parameters()).grad is not None


class _ScaledLogits(Qwen2ForCausalLM):
    """A model whose logits are not head(hidden): it doubles them after the head."""

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        out.logits = out.logits * 2
        return out


def test_models_that_change_logits_after_the_head_keep_their_logits(small_chunks):
    model = _model(cls=_ScaledLogits)
    assert kernels.head_split(model) is None
    prompts, comps = _rows(512)
    got = token_logprobs(model, prompts, comps, pad_id=0, layout="padded", temperature=2.0)
    # doubled logits at temperature 2 are the plain model's at temperature 1
    plain = _model()
    torch.testing.assert_close(
        got.sequence_sum(), _unchunked(plain, prompts, comps, 1.0).detach(), rtol=1e-4, atol=1e-4
    )


def test_a_small_head_output_keeps_its_logits_and_matches_the_recomputed_chunks(monkeypatch):
    # Below HEAD_KEEP_MAX_ELEMENTS the head runs once under autograd (no recomputation); the
    # values and gradients are those of the checkpointed chunks.
    import comlrl.core.logprobs.kernels as kernels

    torch.manual_seed(0)
    head = torch.nn.Linear(16, 40, bias=False)
    hidden = torch.randn(30, 16, requires_grad=True)
    targets = torch.randint(0, 40, (30,))
    results, recomputed = [], []
    checkpoint = torch.utils.checkpoint.checkpoint

    def counted(*args, **kwargs):
        recomputed[-1] += 1
        return checkpoint(*args, **kwargs)

    monkeypatch.setattr(torch.utils.checkpoint, "checkpoint", counted)
    for keep in (kernels.HEAD_KEEP_MAX_ELEMENTS, 0):
        monkeypatch.setattr(kernels, "HEAD_KEEP_MAX_ELEMENTS", keep)
        recomputed.append(0)
        head.zero_grad(set_to_none=True)
        hidden.grad = None
        values, _ = kernels.head_scores(head, hidden, targets, 0.7, chunk=7, entropy=False)
        values.sum().backward()
        results.append((values.detach(), hidden.grad.clone(), head.weight.grad.clone()))
    (v_keep, h_keep, w_keep), (v_ck, h_ck, w_ck) = results
    torch.testing.assert_close(v_keep, v_ck, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(h_keep, h_ck, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(w_keep, w_ck, rtol=1e-5, atol=1e-6)
    assert recomputed == [0, 5]  # kept whole, then 5 checkpointed chunks of 7 positions
