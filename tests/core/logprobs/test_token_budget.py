"""``logprob_max_tokens="auto"``: a loss forward's token budget from the model's size, which
binds at real shapes and changes nothing for a model whose budget exceeds its buffer."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config

from comlrl.core.logprobs import budget, token_logprobs, token_logprobs_parts
from comlrl.core.logprobs.budget import activation_bytes_per_token, min_budget, token_budget
from comlrl.core.testing import tiny_pair
from comlrl.pbrl.pair_batches import pair_groups
from comlrl.reinforce import MAGRPOConfig


class _Shaped(torch.nn.Module):
    """A module with only a transformers config and one parameter: what the budget reads."""

    def __init__(self, **shape):
        super().__init__()
        self.config = Qwen2Config(**shape)
        self.weight = torch.nn.Parameter(torch.zeros(1))


QWEN_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24)


def test_the_default_is_auto_and_binds_at_the_05b_shape():
    assert MAGRPOConfig().logprob_max_tokens == "auto"
    model = _Shaped(**QWEN_05B)
    # 24 layers x 17 x (896 + 4864) fp32 values per token: 9.4 MB, 228 tokens in 2 GiB
    assert activation_bytes_per_token(model) == 24 * 17 * (896 + 4864) * 4
    assert token_budget("auto", model) == 228
    assert token_budget("auto", model.to(torch.bfloat16)) == 456  # half the bytes per value
    assert token_budget(None, model) is None and token_budget(64, model) == 64
    assert token_budget("auto", torch.nn.Linear(2, 2)) is None  # no shape to read: no cap


def test_a_bad_value_names_the_field():
    with pytest.raises(ValueError, match="logprob_max_tokens must be 'auto', None"):
        MAGRPOConfig(logprob_max_tokens="half")
    with pytest.raises(ValueError, match="logprob_max_tokens"):
        MAGRPOConfig(logprob_max_tokens=0)


def _rows(n=6):
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(1, 50, (5,), generator=gen).tolist() for _ in range(n)]
    comps = [torch.randint(1, 50, (4 + i,), generator=gen).tolist() for i in range(n)]
    return prompts, comps


def test_a_test_sized_model_scores_exactly_as_without_a_cap():
    model, _ = tiny_pair(seed=0)
    assert token_budget("auto", model) > 50_000
    prompts, comps = _rows()
    auto = token_logprobs(model, prompts, comps, pad_id=0, max_tokens="auto")
    free = token_logprobs(model, prompts, comps, pad_id=0, max_tokens=None)
    assert torch.equal(auto.values, free.values) and torch.equal(auto.mask, free.mask)


def test_a_binding_budget_splits_the_forwards_and_keeps_the_gradient(monkeypatch):
    model, _ = tiny_pair(seed=0)
    prompts, comps = _rows()
    per_token = activation_bytes_per_token(model)
    monkeypatch.setattr(budget, "CPU_ACTIVATION_BYTES", 20 * per_token)  # a 20-token budget
    assert token_budget("auto", model) == 20

    def gradient(max_tokens):
        model.zero_grad(set_to_none=True)
        parts = list(token_logprobs_parts(model, prompts, comps, pad_id=0, max_tokens=max_tokens))
        for _, lp in parts:
            lp.sequence_sum().sum().backward()
        return len(parts), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    n_auto, g_auto = gradient("auto")
    n_free, g_free = gradient(None)
    assert n_free == 1 and n_auto > 1
    for a, b in zip(g_auto, g_free):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


class _Pair:
    num_actors = 1

    def __init__(self, w, lo):
        self.prompt_ids, self.winner_ids, self.loser_ids = [[1, 2]], [w], [lo]


def test_a_budget_that_does_not_bind_keeps_the_pairs_order():
    pairs = [_Pair([3] * 6, [4]), _Pair([5], [6]), _Pair([7] * 3, [8] * 2)]
    assert pair_groups(pairs, 10_000) == [[0, 1, 2]] == pair_groups(pairs, None)
    assert sorted(j for g in pair_groups(pairs, 12) for j in g) == [0, 1, 2]
    assert len(pair_groups(pairs, 12)) > 1
    assert min_budget([None, 40, 25]) == 25 and min_budget([None]) is None
