"""The k1/k2/k3 KL estimators against hand values, per token and summed per sequence."""

import math

import pytest
import torch

from comlrl.core.algos.losses import check_estimator, estimator_for, token_kl
from comlrl.core.logprobs import token_logprobs
from comlrl.core.models.reference import sequence_kl
from comlrl.core.testing import tiny_pair

LOGP = torch.tensor([-1.0, -2.0])
REF = torch.tensor([-1.5, -1.0])  # d = ref - logp = [-0.5, 1.0]


@pytest.mark.parametrize(
    "estimator, expected",
    [
        ("k1", [0.5, -1.0]),  # -d
        ("k2", [0.125, 0.5]),  # d^2 / 2
        ("k3", [math.exp(-0.5) + 0.5 - 1.0, math.e - 2.0]),  # e^d - d - 1
    ],
)
def test_token_kl_hand_values(estimator, expected):
    assert token_kl(LOGP, REF, estimator).tolist() == pytest.approx(expected)


def test_unknown_estimator_names_the_field():
    with pytest.raises(ValueError, match="reference_kl_estimator must be one of k1, k2, k3"):
        check_estimator("k4")


def test_estimator_defaults_per_place():
    class Args:
        reference_kl_estimator = None

    assert estimator_for(Args(), "reward") == "k1" and estimator_for(Args(), "loss") == "k3"
    Args.reference_kl_estimator = "k2"
    assert estimator_for(Args(), "reward") == "k2" == estimator_for(Args(), "loss")


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_sequence_kl_sums_the_token_estimates(estimator):
    policy, tok = tiny_pair(seed=0)
    reference, _ = tiny_pair(seed=1)
    prompts = [[5, 6, 7], [8, 9]]
    comps = [[10, 11, 12], [13]]
    pad = tok.pad_token_id
    got = sequence_kl(policy, reference, prompts, comps, pad, estimator=estimator)
    pol = token_logprobs(policy, prompts, comps, pad_id=pad, layout="padded")
    ref = token_logprobs(reference, prompts, comps, pad_id=pad, layout="padded")
    for row, comp in enumerate(comps):
        n = len(comp)
        want = token_kl(pol.values[row, :n], ref.values[row, :n], estimator).sum().item()
        assert got[row] == pytest.approx(want, rel=1e-5, abs=1e-6)
    if estimator == "k3":
        assert all(v >= 0 for v in got)


def test_k3_is_clamped_as_verl_clamps_it():
    """A sampled token the policy finds far less likely than the reference (-12 against -0.5)
    gave k3 = 9.9e4 and a gradient of -9.9e4; verl's bounds cap it at 10 with no gradient."""
    logp = torch.tensor([-12.0, -3.0, -0.5, -60.0, 30.0], requires_grad=True)
    ref = torch.tensor([-0.5, -0.5, -0.5, -0.5, -0.5])
    k3 = token_kl(logp, ref, "k3")
    (grad,) = torch.autograd.grad(k3.sum(), logp)
    d = ref - logp.detach()
    assert k3[:3].tolist() == pytest.approx([10.0, math.exp(2.5) - 3.5, 0.0])
    assert k3[3].item() == 10.0  # d = 59.5: clamped to 20 first, so no overflow
    assert k3[4].item() == 10.0  # d = -30.5: clamped to -20, then k3 = 19 to 10
    assert grad[0].item() == 0.0 and grad[3].item() == 0.0 and grad[4].item() == 0.0
    assert grad[1].item() == pytest.approx(1.0 - math.exp(d[1].item()))
