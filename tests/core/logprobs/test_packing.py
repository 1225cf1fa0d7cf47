"""Packed rows give the padded log-probs and gradients; the probe catches models that leak."""

import random

import pytest
import torch

import comlrl.core.logprobs.kernels as kernels
import comlrl.core.logprobs.planning as planning
from comlrl.core.logprobs import completion_logprobs, packed_logprobs, packing_verified
from comlrl.core.logprobs.kernels import bins_next_fit
from comlrl.core.logprobs.planning import bins_first_fit, plan_forwards
from comlrl.core.testing import tiny_pair


def _rows(seed=0, n=9, vocab=300):
    rng = random.Random(seed)
    prompts = [[rng.randrange(1, vocab) for _ in range(rng.randrange(3, 12))] for _ in range(n)]
    comps = [[rng.randrange(1, vocab) for _ in range(rng.randrange(0, 40))] for _ in range(n)]
    return prompts, comps


def _shared_bins(prompts, comps):
    """The rows reordered bin by bin, and whether some bin holds two sequences."""
    lengths = [len(p) + len(c) for p, c in zip(prompts, comps)]
    bins = bins_first_fit(lengths, max(lengths))
    order = [i for b in bins for i in b]
    return order, any(len(b) > 1 for b in bins)


@pytest.mark.parametrize("arch", ["qwen2", "llama", "gpt2"])
def test_packed_rows_equal_padded_rows_values_and_gradients(arch):
    model, tok = tiny_pair(arch=arch)
    prompts, comps = _rows()
    order, shared = _shared_bins(prompts, comps)
    assert shared  # otherwise nothing about packing is tested
    prompts, comps = [prompts[i] for i in order], [comps[i] for i in order]
    width = max(len(p) + len(c) for p, c in zip(prompts, comps))

    padded = completion_logprobs(model, prompts, comps, tok.pad_token_id)
    padded_grads = torch.autograd.grad(padded.sequence_sum().sum(), list(model.parameters()))
    packed = packed_logprobs(model, prompts, comps, tok.pad_token_id, width=width)
    packed_grads = torch.autograd.grad(packed.sequence_sum().sum(), list(model.parameters()))

    assert torch.equal(packed.mask, padded.mask)
    torch.testing.assert_close(packed.values * packed.mask, padded.values * padded.mask)
    for a, b in zip(packed_grads, padded_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_the_probe_rejects_a_model_whose_masks_ignore_packing(monkeypatch):
    model, tok = tiny_pair()
    monkeypatch.setattr(kernels, "_VERIFIED", {})
    assert packing_verified(model, tok.pad_token_id)

    # Without packed-sequence detection the mask is plain causal: sequences see each other.
    import transformers.masking_utils as masking

    monkeypatch.setattr(masking, "find_packed_sequence_indices", lambda position_ids: None)
    monkeypatch.setattr(kernels, "_VERIFIED", {})
    assert not packing_verified(model, tok.pad_token_id)
    assert model.training is False  # the probe restores the mode it found


def test_the_probe_keeps_training_mode():
    model, tok = tiny_pair()
    model.train()
    kernels._VERIFIED.clear()
    packing_verified(model, tok.pad_token_id)
    assert model.training


def test_plan_covers_every_row_once_within_the_budget():
    model, _ = tiny_pair(size="small")
    prompts, comps = _rows(n=24)
    p_lens, c_lens = [len(p) for p in prompts], [len(c) for c in comps]
    groups, kernel = plan_forwards(model, p_lens, c_lens, 160, 0)
    assert kernel.func is packed_logprobs  # varied lengths, a cheap head: packing pays
    assert sorted(i for g in groups for i in g) == list(range(24))
    width = kernel.keywords["width"]
    assert width == max(p + c for p, c in zip(p_lens, c_lens))
    for g in groups:
        bins = bins_next_fit([p_lens[i] + c_lens[i] for i in g], width)
        assert len(bins) * width <= 160


def test_plan_keeps_padding_when_rows_are_alike_or_prompts_empty():
    model, _ = tiny_pair()
    for p_lens, c_lens in [([5] * 4, [20] * 4), ([0, 5], [3, 20]), ([], [])]:
        groups, kernel = plan_forwards(model, p_lens, c_lens, None, 0)
        assert kernel is completion_logprobs
        assert sorted(i for g in groups for i in g) == list(range(len(p_lens)))


def test_an_expensive_head_keeps_padding():
    # 10% padding saved on the body; packing runs the prompt tokens through the head too
    assert planning._packing_pays_for(1000, 10, padded=110, packed=100, completion=60)
    assert not planning._packing_pays_for(1000, 1000, padded=110, packed=100, completion=60)


def test_bins():
    assert bins_first_fit([5, 3, 4, 4], 8) == [[0, 1], [2, 3]]
    assert bins_first_fit([9, 2], 8) == [[0], [1]]
    assert bins_next_fit([5, 3, 4, 4, 1], 8) == [[0, 1], [2, 3], [4]]
    assert bins_next_fit([], 8) == []


def test_empty_prompts_are_refused():
    model, tok = tiny_pair()
    with pytest.raises(ValueError, match="non-empty prompt"):
        packed_logprobs(model, [[]], [[3, 4]], tok.pad_token_id)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_probe_accepts_half_precision_models(dtype, monkeypatch):
    model, tok = tiny_pair()
    model.to(dtype)
    monkeypatch.setattr(kernels, "_VERIFIED", {})
    assert packing_verified(model, tok.pad_token_id)


@pytest.mark.parametrize("tie", [True, False])
def test_the_body_is_priced_without_the_head_or_the_input_table(tie, monkeypatch):
    model, _ = tiny_pair()
    if not tie:
        head = model.get_output_embeddings()
        head.weight = torch.nn.Parameter(head.weight.detach().clone())
    table = model.get_input_embeddings().weight.numel()
    body = sum(p.numel() for p in model.parameters()) - table - (0 if tie else table)
    seen = []
    monkeypatch.setattr(planning, "_packing_pays_for", lambda *args: seen.append(args) or True)
    planning.packing_pays(model, 10, 10, 5)
    assert seen[0][:2] == (body, table)


def test_a_forward_is_priced_higher_for_a_smaller_model_within_bounds():
    tiny, _ = tiny_pair()
    small, _ = tiny_pair(size="small")
    low, high = planning._FORWARD_COST_BOUNDS
    tiny_cost, small_cost = planning.forward_cost_tokens(tiny), planning.forward_cost_tokens(small)
    assert low <= small_cost < tiny_cost <= high
    # The measured points: 250 tokens at 0.1M body weights, 100 at 4.8M.
    assert planning._log_log(planning._FORWARD_COST, (0, 1e9), 1.0e5) == pytest.approx(250.0)
    assert planning._log_log(planning._FORWARD_COST, (0, 1e9), 4.8e6) == pytest.approx(100.0)


def test_a_small_model_scores_near_lengths_in_one_padded_forward():
    # 16 rows of one buffer as a random-init model samples them: most run to 64 tokens, a few
    # stop early. A forward's fixed price on the 0.1M model exceeds the padding a split saves.
    model, _ = tiny_pair()
    p_lens = [8, 9, 11, 12] * 4
    c_lens = [7, 31, 34, 40, 43] + [64] * 11
    groups, kernel = plan_forwards(model, p_lens, c_lens, None, 0)
    assert kernel is completion_logprobs
    assert groups == [sorted(groups[0], key=lambda i: (c_lens[i], p_lens[i]))]
    assert len(groups[0]) == 16
