"""IAC and MAAC score every actor log-prob at the sampling temperature: the update's, the
rollout's for ``ppo`` and both sides of the reward's KL. (Each kernel's tempered values are
checked against a by-hand log-softmax in tests/core/test_tempered_logprobs.py.)"""

import pytest

import comlrl.core.logprobs.kernels as kernels

from .helpers import make_iac, make_maac

T = 0.6


def _temperatures(monkeypatch) -> list[float]:
    """Every temperature a kernel scores at from now on."""
    seen: list[float] = []
    original = kernels.selective_log_softmax

    def spied(logits, targets, temperature=1.0):
        seen.append(temperature)
        return original(logits, targets, temperature)

    monkeypatch.setattr(kernels, "selective_log_softmax", spied)
    return seen


@pytest.mark.parametrize("separate", [True, False])
def test_iac_scores_old_new_and_kl_at_the_sampling_temperature(tmp_path, monkeypatch, separate):
    trainer = make_iac(
        tmp_path,
        separate=separate,
        temperature=T,
        policy_loss="ppo",
        reference_kl_enabled=True,
        reference_kl_coef=0.1,
    )
    seen = _temperatures(monkeypatch)
    trainer.train()
    # rollout log-probs, the KL's policy and reference forwards, and the update's
    assert len(seen) >= 4 and set(seen) == {T}


def test_maac_scores_at_the_sampling_temperature(tmp_path, monkeypatch):
    trainer = make_maac(tmp_path, temperature=T, num_turns=2, num_generations=1)
    seen = _temperatures(monkeypatch)
    trainer.train()
    assert seen and set(seen) == {T}
