"""A gradient pass with large activations hands its freed heap pages back after its last
backward; small passes and passes without gradients leave the heap alone."""

from __future__ import annotations

import torch

import comlrl.core.logprobs.heap as heap
from comlrl.core.logprobs import token_logprobs_parts
from comlrl.core.testing import tiny_pair


def _record(monkeypatch, min_bytes: int) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(heap, "RELEASE_MIN_BYTES", min_bytes)
    monkeypatch.setattr(heap, "_malloc_trim", lambda: lambda pad: calls.append("trim"))
    return calls


def _rows():
    prompts = [[3, 4, 5], [3, 4, 5], [6, 7]]
    comps = [[8, 9, 10, 11], [12, 13], [14, 15, 16]]
    return prompts, comps


def test_the_release_follows_the_last_backward_of_a_large_pass(monkeypatch):
    model, tok = tiny_pair()
    calls = _record(monkeypatch, min_bytes=1)
    prompts, comps = _rows()
    parts = token_logprobs_parts(model, prompts, comps, pad_id=tok.pad_token_id, max_tokens=8)
    drawn = 0
    for _, lp in parts:
        drawn += 1
        (lp.values * lp.mask).sum().backward()
        assert calls == []  # never while a part's graph may still be in use
    assert drawn > 1 and calls == ["trim"]


def test_small_passes_and_scoring_without_gradients_keep_the_heap(monkeypatch):
    model, tok = tiny_pair()
    calls = _record(monkeypatch, min_bytes=heap.RELEASE_MIN_BYTES)
    prompts, comps = _rows()
    for _, lp in token_logprobs_parts(model, prompts, comps, pad_id=tok.pad_token_id):
        (lp.values * lp.mask).sum().backward()
    monkeypatch.setattr(heap, "RELEASE_MIN_BYTES", 1)
    with torch.no_grad():
        list(token_logprobs_parts(model, prompts, comps, pad_id=tok.pad_token_id))
    assert calls == []


def test_release_is_a_no_op_without_malloc_trim(monkeypatch):
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.release_after_pass(1 << 40) is False
    assert heap.release_after_pass(None) is False
