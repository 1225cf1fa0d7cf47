"""The compacting decoder samples exactly what ``model.generate`` samples (its draw is
``multinomial``'s, bit for bit), and the length-sorted micro-batches cover every row once within
the token budget."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import comlrl.core.rollout.generation as generation
from comlrl.core.logprobs import length_sorted_micro_batches
from comlrl.core.rollout.generation import SamplingParams, generate_samples, supports_compacting
from comlrl.core.testing import prompts, tiny_pair


def _both_paths(model, tok, params, k, monkeypatch):
    torch.manual_seed(0)
    fast = generate_samples(model, tok, prompts(4), k, params)
    after_fast = torch.rand(1)
    with monkeypatch.context() as m:
        m.setattr(generation, "supports_compacting", lambda *_: False)
        torch.manual_seed(0)
        slow = generate_samples(model, tok, prompts(4), k, params)
    return fast, slow, after_fast, torch.rand(1)


@pytest.mark.parametrize("arch", ["qwen2", "gpt2"])
@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(max_new_tokens=12, temperature=0.6, top_p=0.6, top_k=50),
        SamplingParams(max_new_tokens=12, temperature=1.0, top_p=1.0, top_k=None),
        SamplingParams(max_new_tokens=12, do_sample=False),
        SamplingParams(max_new_tokens=12, extra={"min_new_tokens": 3}),
    ],
    ids=["warped", "plain", "greedy", "min_new_tokens"],
)
def test_compacting_decoder_matches_generate(arch, params, monkeypatch):
    model, tok = tiny_pair(arch=arch, pretrain_steps=40)
    assert supports_compacting(model, params.generate_kwargs())
    k = 4 if params.do_sample else 1  # generate rejects K > 1 greedy copies
    fast, slow, rng_fast, rng_slow = _both_paths(model, tok, params, k, monkeypatch)
    assert [s.completion_ids for s in fast] == [s.completion_ids for s in slow]
    assert [s.texts for s in fast] == [s.texts for s in slow]
    # Same random numbers consumed: the training trajectory after a rollout is unchanged.
    assert torch.equal(rng_fast, rng_slow)
    if params.do_sample and not params.extra:
        lengths = {len(c) for s in fast for c in s.completion_ids}
        assert len(lengths) > 1, "rows should stop at different lengths for this test to bite"


@pytest.mark.parametrize("vocab", [320, 4096])
def test_the_draw_is_multinomials_bit_for_bit(vocab):
    """``draw_rows`` draws ``multinomial``'s tokens from the same random numbers, with warped
    rows (zeros) and placeholder rows, under the process generator and a given one; the
    generators end in the same state."""
    from comlrl.core.rollout.decoding import draw_rows

    for seed in range(30):
        logits = torch.randn(48, vocab, generator=torch.Generator().manual_seed(1000 + seed)) * 3
        logits[::3, vocab // 2 :] = float("-inf")  # top-k/top-p style masked tails
        probs = logits.softmax(-1)
        probs[5] = 0.0
        probs[5, 0] = 1.0  # a row that left the batch
        mine, theirs = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        drawn = draw_rows(probs, mine)
        assert torch.equal(drawn, torch.multinomial(probs, 1, generator=theirs).squeeze(1))
        assert drawn[5] == 0
        assert torch.equal(torch.rand(3, generator=mine), torch.rand(3, generator=theirs))
    torch.manual_seed(7)
    drawn = draw_rows(probs)
    torch.manual_seed(7)
    assert torch.equal(drawn, torch.multinomial(probs, 1).squeeze(1))


def test_the_draw_refuses_what_multinomial_refuses():
    from comlrl.core.rollout.decoding import draw_rows

    bad = torch.full((2, 8), 0.125)
    bad[1, 3] = float("nan")
    with pytest.raises(RuntimeError, match="inf`, `nan` or element < 0"):
        draw_rows(bad)
    with pytest.raises(RuntimeError, match="sum of probabilities"):
        draw_rows(torch.zeros(2, 8))


def test_rows_end_at_their_first_eos():
    from comlrl.core.rollout.decoding import through_first_eos

    drawn = torch.tensor([[5, 2, 9, 2], [5, 6, 7, 8], [3, 5, 5, 5], [1, 1, 1, 1]])
    rows = through_first_eos(drawn, torch.tensor([2, 3]))
    assert rows == [[5, 2], [5, 6, 7, 8], [3], [1, 1, 1, 1]]
    assert through_first_eos(drawn[:, :2], torch.tensor([], dtype=torch.long)) == [
        [5, 2],
        [5, 6],
        [3, 5],
        [1, 1],
    ]


def test_min_new_tokens_holds_eos_back():
    model, tok = tiny_pair(pretrain_steps=40)
    lengths = {}
    for floor in (0, 3):
        params = SamplingParams(max_new_tokens=12, extra={"min_new_tokens": floor})
        torch.manual_seed(0)
        out = generate_samples(model, tok, prompts(4), 4, params)
        lengths[floor] = [len(c) for s in out for c in s.completion_ids]
    assert min(lengths[0]) < 3, "some row must stop early for the floor to bite"
    assert min(lengths[3]) >= 3


def test_greedy_copies_still_rejected():
    model, tok = tiny_pair()
    with pytest.raises(ValueError, match="num_return_sequences"):
        generate_samples(
            model, tok, prompts(1), 2, SamplingParams(max_new_tokens=2, do_sample=False)
        )


def test_extra_generate_kwargs_use_generate():
    model, _ = tiny_pair()
    kwargs = SamplingParams(max_new_tokens=4, extra={"repetition_penalty": 1.2}).generate_kwargs()
    assert not supports_compacting(model, kwargs)
    model.generation_config.no_repeat_ngram_size = 2
    assert not supports_compacting(model, SamplingParams(max_new_tokens=4).generate_kwargs())


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(1, 30), st.integers(0, 40)), min_size=0, max_size=40),
    budget=st.one_of(st.none(), st.integers(1, 400)),
)
def test_length_sorted_micro_batches_cover_rows_within_budget(rows, budget):
    plen = [p for p, _ in rows]
    clen = [c for _, c in rows]
    groups = length_sorted_micro_batches(plen, clen, budget)
    flat = [i for g in groups for i in g]
    assert sorted(flat) == list(range(len(rows)))
    for g in groups:
        assert g
        padded = (max(plen[i] for i in g) + max(1, max(clen[i] for i in g))) * len(g)
        assert budget is None or len(g) == 1 or padded <= budget
    if budget is None:
        assert len(groups) <= 1


@pytest.mark.parametrize("arch", ["qwen2", "gpt2"])
def test_shared_prompt_logprobs_equal_packed(arch):
    from comlrl.core.logprobs import completion_logprobs, shared_prompt_logprobs

    model, tok = tiny_pair(arch=arch)
    model.eval()  # gpt2 has dropout; compare the deterministic forward
    eos = tok.eos_token_id
    a, b = tok("Write a story about a cat.")["input_ids"], tok("Hi")["input_ids"]
    prompt_ids = [a, a, a, b, b]
    comps = [[5, 9, 17, eos], [33], [7, 7, 8, 10, 11, 12, eos], [], [9, 8, 7, 6]]
    packed = completion_logprobs(model, prompt_ids, comps, tok.pad_token_id)
    shared = shared_prompt_logprobs(model, prompt_ids, comps, tok.pad_token_id)
    assert torch.equal(packed.mask, shared.mask)
    assert torch.allclose(packed.values * packed.mask, shared.values * shared.mask, atol=1e-5)
    params = list(model.parameters())
    g1 = torch.autograd.grad(packed.sequence_sum().sum(), params, allow_unused=True)
    g2 = torch.autograd.grad(shared.sequence_sum().sum(), params, allow_unused=True)
    for x, y in zip(g1, g2):
        assert (x is None) == (y is None)
        if x is not None:
            assert torch.allclose(x, y, atol=1e-4)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 40)), min_size=0, max_size=40),
    budget=st.one_of(st.none(), st.integers(1, 400)),
)
def test_shared_prompt_micro_batches_keep_budget(rows, budget):
    from comlrl.core.logprobs import shared_prompt_micro_batches

    prompt_ids = [[7] * (3 + 5 * p) for p, _ in rows]  # 5 distinct prompts of distinct lengths
    clen = [c for _, c in rows]
    groups = shared_prompt_micro_batches(prompt_ids, clen, budget)
    assert sorted(i for g in groups for i in g) == list(range(len(rows)))
    for g in groups:
        distinct = {tuple(prompt_ids[i]) for i in g}
        cost = len(distinct) * max(len(p) for p in distinct) + len(g) * max(
            1, max(clen[i] for i in g)
        )
        assert budget is None or len(g) == 1 or cost <= budget
