"""Batched log-probs equal a one-sequence-at-a-time computation; EOS scored, pads never."""

import pytest
import torch

from comlrl.core.logprobs import completion_logprobs, micro_batches
from comlrl.core.testing import tiny_pair


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
