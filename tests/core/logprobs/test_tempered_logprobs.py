"""Log-probs at the sampling temperature: every kernel and the engine score
``log_softmax(logits / T)``, and scoring at T makes the policy gradient the sampler's.

The toy numbers are those of the second algorithms audit (a 5-way categorical and a two-token
sequence at T = 0.6), worked out by hand below."""

import itertools
import math
import random

import pytest
import torch

from comlrl.core.logprobs import (
    LAYOUTS,
    completion_logprobs,
    packed_logprobs,
    padded_forward,
    selective_log_softmax,
    shared_prompt_logprobs,
    token_logprobs,
    token_logprobs_parts,
)
from comlrl.core.testing import tiny_pair

T = 0.6
# Batched forwards equal a one-row forward up to float rounding (as in test_logprobs.py).
TOL = dict(rtol=1e-4, atol=1e-5)


def _rows(seed=0):
    """Prompts shared by several rows, mixed completion lengths, one duplicate row."""
    rng = random.Random(seed)
    prompts = [[rng.randrange(1, 300) for _ in range(rng.randrange(3, 10))] for _ in range(3)]
    rows_p, rows_c = [], []
    for p in prompts:
        for _ in range(3):
            rows_p.append(p)
            rows_c.append([rng.randrange(1, 300) for _ in range(rng.randrange(1, 12))])
    return rows_p + [prompts[1]], rows_c + [rows_c[4]]


def _sharp_model():
    """A tiny model whose logits are spread out (scaled output layer), so T = 0.6 and T = 1
    give clearly different log-probs."""
    model, tok = tiny_pair(size="small")
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(3.0)
    return model.eval(), tok


def _by_hand(model, prompts, comps, temperature):
    """Each row alone: ``log_softmax(logits / T)`` at its completion tokens, ``[rows, width]``."""
    width = max(len(c) for c in comps)
    out = torch.zeros(len(comps), width)
    for i, (p, c) in enumerate(zip(prompts, comps)):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([p + c])).logits[0].float()
        logp = torch.log_softmax(logits / temperature, -1)
        for t, y in enumerate(c):
            out[i, t] = logp[len(p) - 1 + t, y]
    return out


@pytest.fixture(scope="module")
def setup():
    model, tok = _sharp_model()
    prompts, comps = _rows()
    want = _by_hand(model, prompts, comps, T)
    at_one = _by_hand(model, prompts, comps, 1.0)
    mask = torch.zeros_like(want)
    for i, c in enumerate(comps):
        mask[i, : len(c)] = 1.0
    # The check below can fail: T = 0.6 is far from T = 1 on these rows.
    assert ((want - at_one) * mask).abs().max().item() > 0.1
    return model, tok.pad_token_id, prompts, comps, want, mask


def _check(lp, want, mask):
    assert torch.equal(lp.mask.cpu(), mask)
    torch.testing.assert_close(lp.values.cpu() * mask, want * mask, **TOL)


@pytest.mark.parametrize(
    "kernel", [completion_logprobs, shared_prompt_logprobs, packed_logprobs, "padded_forward"]
)
def test_every_kernel_scores_the_tempered_distribution(setup, kernel):
    model, pad, prompts, comps, want, mask = setup
    with torch.no_grad():
        if kernel == "padded_forward":
            lp = padded_forward(model, prompts, comps, pad, temperature=T)[0]
        else:
            lp = kernel(model, prompts, comps, pad, temperature=T)
    _check(lp, want, mask)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("max_tokens", [None, 40])
def test_score_and_score_parts_use_the_temperature_on_every_layout(setup, layout, max_tokens):
    model, pad, prompts, comps, want, mask = setup
    got = token_logprobs(
        model, prompts, comps, pad_id=pad, max_tokens=max_tokens, layout=layout, temperature=T
    )
    _check(got, want, mask)
    torch.testing.assert_close(got.sequence_sum().cpu(), (want * mask).sum(-1), **TOL)
    seen = []
    with torch.no_grad():
        for idx, lp in token_logprobs_parts(
            model, prompts, comps, pad_id=pad, max_tokens=max_tokens, layout=layout, temperature=T
        ):
            width = lp.mask.shape[1]
            _check(lp, want[idx][:, :width], mask[idx][:, :width].contiguous())
            seen += idx
    assert sorted(seen) == list(range(len(prompts)))


def test_selective_log_softmax_divides_half_precision_logits_in_fp32():
    logits = (torch.randn(4, 7, 50, generator=torch.Generator().manual_seed(0)) * 4).bfloat16()
    targets = torch.randint(0, 50, (4, 7), generator=torch.Generator().manual_seed(1))
    want = torch.log_softmax(logits.float() / T, -1).gather(-1, targets[..., None])[..., 0]
    torch.testing.assert_close(selective_log_softmax(logits, targets, T), want)


@pytest.mark.parametrize("bad", [0, 0.0, -0.6, float("nan"), float("inf"), True, "0.6", None])
def test_a_temperature_that_is_not_a_positive_number_is_refused(setup, bad):
    model, pad, prompts, comps, _, _ = setup
    with pytest.raises(ValueError, match="temperature"):
        token_logprobs(model, prompts, comps, pad_id=pad, temperature=bad)
    with pytest.raises(ValueError, match="temperature"):
        next(token_logprobs_parts(model, prompts, comps, pad_id=pad, temperature=bad))


def test_the_ratio_of_the_sampler_by_hand():
    """Logits z = [2, 1, 0, -1, -2] moved by dz = [0.15, 0, 0, 0, -0.15]: token 1's ratio under
    the T = 0.6 sampler is Z(z/T) / Z((z+dz)/T) = 34.5507 / 42.5045 = 0.8129 (0.9080 at T = 1)."""
    z = torch.tensor([[2.0, 1.0, 0.0, -1.0, -2.0]])
    dz = torch.tensor([[0.15, 0.0, 0.0, 0.0, -0.15]])
    token = torch.tensor([1])
    z_old = sum(math.exp(v / T) for v in (2, 1, 0, -1, -2))
    z_new = sum(math.exp(v / T) for v in (2.15, 1, 0, -1, -2.15))
    assert z_old == pytest.approx(34.5507, abs=1e-4) and z_new == pytest.approx(42.5045, abs=1e-4)
    ratio = (selective_log_softmax(z + dz, token, T) - selective_log_softmax(z, token, T)).exp()
    assert ratio.item() == pytest.approx(z_old / z_new, abs=1e-6)
    assert ratio.item() == pytest.approx(0.8129, abs=1e-4)
    at_one = (selective_log_softmax(z + dz, token) - selective_log_softmax(z, token)).exp()
    assert at_one.item() == pytest.approx(0.9080, abs=1e-4)


def test_scoring_at_the_sampling_temperature_gives_the_samplers_gradient():
    """Two tokens over a vocabulary of 3, sampled at T = 0.6: the expected score-function
    gradient with a mean baseline is exactly the gradient of E_{pi^T}[R] when the log-probs are
    scored at T; scored at T = 1 it points elsewhere (cosine 0.9983, the audit's number)."""
    z1 = torch.tensor([0.5, 0.0, -0.3], dtype=torch.float64, requires_grad=True)
    z2 = torch.tensor(
        [[0.2, -0.1, 0.4], [1.0, 0.0, -1.0], [0.0, 0.3, 0.1]],
        dtype=torch.float64,
        requires_grad=True,
    )
    reward = torch.tensor([[1.0, 0.0, 0.2], [0.0, 1.0, 0.5], [0.3, 0.3, 0.9]], dtype=torch.float64)
    seqs = list(itertools.product(range(3), range(3)))

    def logp(a, b, temperature):
        first = selective_log_softmax(z1[None].double(), torch.tensor([a]), temperature)
        second = selective_log_softmax(z2[a][None].double(), torch.tensor([b]), temperature)
        return (first + second)[0]

    def exact(a, b):  # the sampler's own distribution, in float64
        return torch.log_softmax(z1 / T, -1)[a] + torch.log_softmax(z2[a] / T, -1)[b]

    probs = torch.stack([exact(a, b).exp() for a, b in seqs])
    objective = sum(probs[k] * reward[a, b] for k, (a, b) in enumerate(seqs))
    true = torch.cat([g.flatten() for g in torch.autograd.grad(objective, (z1, z2))])
    baseline = objective.detach()

    def expected_gradient(temperature):
        surrogate = sum(
            probs[k].detach() * (reward[a, b] - baseline) * logp(a, b, temperature)
            for k, (a, b) in enumerate(seqs)
        )
        return torch.cat([g.flatten() for g in torch.autograd.grad(surrogate, (z1, z2))])

    # selective_log_softmax works in fp32, hence the tolerance
    torch.testing.assert_close(expected_gradient(T), true, rtol=1e-5, atol=1e-6)
    at_one = expected_gradient(1.0)
    cosine = torch.dot(at_one, true) / at_one.norm() / true.norm()
    assert cosine.item() == pytest.approx(0.9983, abs=1e-4)
