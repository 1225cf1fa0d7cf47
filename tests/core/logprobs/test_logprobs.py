"""Batched log-probs equal a one-sequence-at-a-time computation (EOS scored, pads never), and
the engine gives the padded values and gradients within its token budget."""

import random

import pytest
import torch

from comlrl.core.logprobs import (
    LAYOUTS,
    completion_logprobs,
    micro_batches,
    packed_logprobs,
    packing_verified,
    plan,
    plan_forwards,
    shared_prompt_logprobs,
    token_logprobs,
    token_logprobs_parts,
)
from comlrl.core.testing import tiny_pair

# Shared-prompt and packed forwards equal padded ones up to float rounding.
TOL = dict(rtol=1e-4, atol=1e-5)
# Gradients sum over every row; the head's gradient is now accumulated chunk by chunk in
# another order, and under ATEN_CPU_CAPABILITY=avx2 one element of 81,920 differed by 1.09e-5
# (default kernels: within 1e-5). 5e-5 leaves room for that rounding and no more.
GRAD_TOL = dict(rtol=1e-4, atol=5e-5)


def _single(model, prompt, completion):
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    p = len(prompt)
    return [logp[p - 1 + t, completion[t]].item() for t in range(len(completion))]


@pytest.mark.parametrize("separate_pad", [False, True])
def test_batched_equals_single(separate_pad):
    model, tok = tiny_pair(separate_pad=separate_pad)
    eos = tok.eos_token_id
    prompts = [
        tok("Write a story about a cat.")["input_ids"],
        tok("Hi")["input_ids"],
        tok("A long prompt about the sea and a boat")["input_ids"],
    ]
    comps = [[5, 9, 17, eos], [33], [7, 7, 8, 10, 11, 12, eos]]
    with torch.no_grad():
        lp = completion_logprobs(model, prompts, comps, tok.pad_token_id)
    for i, (p, c) in enumerate(zip(prompts, comps)):
        expected = _single(model, p, c)
        n = len(c)
        assert lp.mask[i, :n].tolist() == [1.0] * n  # every token scored, EOS included
        assert lp.mask[i, n:].sum().item() == 0  # pads never scored
        assert lp.values[i, :n].tolist() == pytest.approx(expected, abs=1e-4)
        assert lp.sequence_sum()[i].item() == pytest.approx(sum(expected), abs=1e-3)


def test_gradients_flow_only_through_real_tokens():
    model, tok = tiny_pair()
    prompts = [tok("Hello there")["input_ids"]] * 2
    comps = [[4, 5, tok.eos_token_id], [6]]
    lp = completion_logprobs(model, prompts, comps, tok.pad_token_id)
    lp.sequence_sum().sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_micro_batches_respect_budget():
    lengths = [10, 10, 10, 40, 5]
    groups = list(micro_batches(lengths, max_tokens=40))
    assert [i for g in groups for i in g] == list(range(5))
    for g in groups:
        assert len(g) == 1 or max(lengths[i] for i in g) * len(g) <= 40
    assert list(micro_batches(lengths, None)) == [list(range(5))]


def test_padding_aware_micro_batches_cut_where_padding_costs_more_than_a_forward():
    from comlrl.core.logprobs import padded_tokens, padding_aware_micro_batches

    prompts = [10, 10, 10, 10, 10, 10]
    comps = [64, 12, 60, 10, 11, 62]
    groups = padding_aware_micro_batches(prompts, comps, None, forward_cost=32)
    # every row exactly once; short and long rows apart, each group in length order
    assert sorted(i for g in groups for i in g) == list(range(6))
    assert groups == [[3, 4, 1], [2, 5, 0]]
    assert padded_tokens(groups, prompts, comps) == 3 * (10 + 12) + 3 * (10 + 64)
    # a huge forward cost never splits (one group, as length_sorted_micro_batches without a cap)
    assert padding_aware_micro_batches(prompts, comps, None, forward_cost=10**9) == [
        [3, 4, 1, 2, 5, 0]
    ]
    # the token cap still holds
    for g in padding_aware_micro_batches(prompts, comps, 150, forward_cost=10**9):
        assert padded_tokens([g], prompts, comps) <= 150 or len(g) == 1
    assert padding_aware_micro_batches([], [], 100) == []
    with pytest.raises(ValueError):
        padding_aware_micro_batches([1], [], 100)


# ---------------------------------------------------------------------------- the engine


def _engine_rows(seed=0):
    """Mixed lengths, prompts shared by several rows, an exact duplicate row, an empty
    completion."""
    rng = random.Random(seed)
    prompts = [[rng.randrange(1, 300) for _ in range(rng.randrange(3, 12))] for _ in range(4)]
    rows_p, rows_c = [], []
    for p in prompts:
        for _ in range(3):
            rows_p.append(p)
            rows_c.append([rng.randrange(1, 300) for _ in range(rng.randrange(1, 30))])
    rows_p += [prompts[0], prompts[2], [5, 6, 7]]
    rows_c += [rows_c[1], rows_c[7], []]  # two duplicates and an empty completion
    weights = torch.tensor([rng.uniform(-1, 1) for _ in rows_p])
    return rows_p, rows_c, weights


def _grads(model, loss_of):
    model.zero_grad(set_to_none=True)
    loss_of().backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("max_tokens", [None, 90])
def test_the_engine_gives_the_padded_values_and_gradients(layout, max_tokens):
    model, tok = tiny_pair(size="small")
    pad = tok.pad_token_id
    prompts, comps, w = _engine_rows()
    ref = completion_logprobs(model, prompts, comps, pad)  # one padded forward, no dedupe

    got = token_logprobs(model, prompts, comps, pad_id=pad, max_tokens=max_tokens, layout=layout)
    assert got.values.shape == got.mask.shape == ref.mask.shape  # [rows, longest completion]
    assert torch.equal(got.mask, ref.mask)
    torch.testing.assert_close(got.values * got.mask, ref.values * ref.mask, **TOL)
    torch.testing.assert_close(got.sequence_sum(), ref.sequence_sum(), **TOL)

    want = _grads(
        model, lambda: (w * completion_logprobs(model, prompts, comps, pad).sequence_sum()).sum()
    )
    whole = _grads(
        model,
        lambda: (
            w
            * token_logprobs(
                model, prompts, comps, pad_id=pad, max_tokens=max_tokens, grad=True, layout=layout
            ).sequence_sum()
        ).sum(),
    )
    model.zero_grad(set_to_none=True)
    seen = []
    for idx, lp in token_logprobs_parts(
        model, prompts, comps, pad_id=pad, max_tokens=max_tokens, layout=layout
    ):
        assert lp.values.shape == lp.mask.shape and lp.mask.shape[0] == len(idx)
        assert lp.mask.sum(-1).tolist() == [float(len(comps[j])) for j in idx]
        (w[idx] * lp.sequence_sum()).sum().backward()
        seen += idx
    parts = [p.grad.clone() for p in model.parameters()]
    assert sorted(seen) == list(range(len(prompts)))  # every row in exactly one part
    for a, b, c in zip(want, whole, parts):
        torch.testing.assert_close(b, a, **GRAD_TOL)
        torch.testing.assert_close(c, a, **GRAD_TOL)


def _forward_sizes(model):
    """Records the tokens of every forward of ``model``; returns the list."""
    sizes = []
    model.register_forward_pre_hook(
        lambda _m, _args, kwargs: sizes.append(kwargs["input_ids"].numel()), with_kwargs=True
    )
    return sizes


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("max_tokens", [40, 90, 200])
def test_no_planned_forward_exceeds_the_budget_unless_one_row_alone_does(layout, max_tokens):
    model, tok = tiny_pair(size="small")
    pad = tok.pad_token_id
    packing_verified(model, pad)  # the probe's own forwards stay out of the count
    prompts, comps, _ = _engine_rows(seed=1)
    sizes = _forward_sizes(model)
    parts = 0
    with torch.no_grad():
        for idx, _ in token_logprobs_parts(
            model, prompts, comps, pad_id=pad, max_tokens=max_tokens, layout=layout
        ):
            distinct = {(tuple(prompts[j]), tuple(comps[j])) for j in idx}
            assert sum(sizes) <= max_tokens or len(distinct) == 1, (idx, sizes)
            sizes.clear()
            parts += 1
    assert parts > 1  # the budget did split the rows


def test_duplicate_rows_are_scored_once_and_share_their_value():
    model, tok = tiny_pair()
    prompts, comps = [[3, 4, 5]] * 3 + [[6, 7]], [[8, 9], [10], [8, 9], [8, 9]]
    rows = []
    model.register_forward_pre_hook(
        lambda _m, _args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    lp = token_logprobs(model, prompts, comps, pad_id=tok.pad_token_id, layout="padded")
    assert rows == [3]  # four rows, three distinct
    assert lp.sequence_sum()[0].item() == lp.sequence_sum()[2].item()
    rows.clear()
    token_logprobs(model, prompts, comps, pad_id=tok.pad_token_id, layout="padded", dedupe=False)
    assert rows == [4]
    rows.clear()
    parts = list(
        token_logprobs_parts(model, prompts, comps, pad_id=tok.pad_token_id, layout="padded")
    )
    assert rows == [3] and sorted(j for idx, _ in parts for j in idx) == [0, 1, 2, 3]


def test_auto_shares_repeated_prompts_and_packs_or_pads_the_rest():
    model, tok = tiny_pair()
    pad = tok.pad_token_id
    # one long prompt repeated six times: sharing it saves far more than its second pass costs
    prompts = [[1] * 300] * 6 + [[3]]
    groups, kernel = plan(model, prompts, [[4], [5, 6], [7], [8], [9], [4], [5]], None, pad)
    assert kernel is shared_prompt_logprobs and sorted(groups[0]) == list(range(7))
    _, kernel = plan(model, [[1, 2], [3]], [[4], [5, 6]], None, pad)
    assert kernel is completion_logprobs or kernel.func is packed_logprobs
    assert (
        plan(model, [[1, 2], [3]], [[4], [5]], None, pad, layout="padded")[1] is completion_logprobs
    )


def test_a_sequence_longer_than_the_budget_keeps_packing_out():
    model, _ = tiny_pair(size="small")
    groups, kernel = plan_forwards(model, [10, 10, 10], [90, 20, 15], 60, 0)
    assert kernel is completion_logprobs  # packed rows would be 100 wide for a 60-token budget
    assert sorted(i for g in groups for i in g) == [0, 1, 2]


def test_the_engine_refuses_bad_input_and_scores_no_rows():
    model, tok = tiny_pair()
    pad = tok.pad_token_id
    with pytest.raises(ValueError, match="layout"):
        token_logprobs(model, [[1]], [[2]], pad_id=pad, layout="ragged")
    with pytest.raises(ValueError, match="max_tokens"):
        token_logprobs(model, [[1]], [[2]], pad_id=pad, max_tokens=0)
    with pytest.raises(ValueError, match="prompt_ids and completion_ids"):
        list(token_logprobs_parts(model, [[1], [2]], [[3]], pad_id=pad))
    empty = token_logprobs(model, [], [], pad_id=pad)
    assert empty.values.shape[0] == 0 and empty.sequence_sum().shape == (0,)


def test_auto_shares_prompts_only_where_the_second_pass_pays():
    from comlrl.core.logprobs.planning import shared_pass_cost_tokens, sharing_pays

    tiny, _ = tiny_pair()
    small, _ = tiny_pair(size="small")
    # price per shared group: far higher for a 0.1M model (fixed costs) than for a 4.8M one
    assert shared_pass_cost_tokens(tiny) > 5 * shared_pass_cost_tokens(small)
    short = [[i + 1] * 14 for i in range(4) for _ in range(4)]  # 4 prompts x K=4, 14 tokens
    long = [[i + 1] * 200 for i in range(4) for _ in range(4)]
    comps = [[7] * 64 for _ in range(16)]
    lengths = [64] * 16
    assert not sharing_pays(tiny, short, lengths, None)  # saves 168 tokens: not worth a pass
    assert sharing_pays(tiny, long, lengths, None)  # saves 2400 tokens
    assert sharing_pays(small, short, lengths, None)
    assert plan(tiny, short, comps, None, 0)[1] is not shared_prompt_logprobs
    assert plan(tiny, long, comps, None, 0)[1] is shared_prompt_logprobs
    assert plan(small, short, comps, None, 0)[1] is shared_prompt_logprobs
    # either layout scores the same values
    a = token_logprobs(tiny, short, comps, pad_id=0, layout="shared_prompt")
    b = token_logprobs(tiny, short, comps, pad_id=0)
    assert torch.allclose(a.values, b.values, atol=1e-5)
