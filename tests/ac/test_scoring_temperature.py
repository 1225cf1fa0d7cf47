"""IAC and MAAC score every actor log-prob at the sampling temperature: the update's, the
rollout's for ``ppo`` and both sides of the reward's KL. (Each kernel's tempered values are
checked against a by-hand log-softmax in tests/core/logprobs/test_tempered_logprobs.py.)"""

import pytest

import comlrl.core.logprobs.kernels as kernels

from .helpers import make_iac, make_maac

T = 0.6


def _temperatures(monkeypatch) -> list[float]:
    """Every temperature a kernel scores at from now on."""
    seen: list[float] = []
    # A watched step's forwards score through the kernel that also measures entropy.
    for name in ("selective_log_softmax", "logprobs_and_entropy"):
        original = getattr(kernels, name)

        def spied(logits, targets, temperature=1.0, _original=original):
            seen.append(temperature)
            return _original(logits, targets, temperature)

        monkeypatch.setattr(kernels, name, spied)
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


def test_with_dropout_the_actors_first_pass_ratio_is_one(tmp_path, monkeypatch):
    """GPT-2's default dropout (0.1) is off in the actor's update as at rollout: before the fix
    the update scored another random sub-network each forward."""
    import torch

    import comlrl.ac.ppo as ppo_module
    import comlrl.core.training.policy_update as update_module
    from comlrl.ac import IACConfig, IACTrainer
    from comlrl.core.testing import tiny_pair

    from .helpers import PROMPTS, config, length_reward

    m0, tok = tiny_pair(arch="gpt2", seed=0)
    m1, _ = tiny_pair(arch="gpt2", seed=1)
    critics = [tiny_pair(arch="gpt2", seed=2)[0], tiny_pair(arch="gpt2", seed=3)[0]]
    trainer = IACTrainer(
        agents=[m0, m1],
        critics=critics,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=length_reward,
        args=config(IACConfig, temperature=T, policy_loss="ppo", output_dir=str(tmp_path / "r")),
    )
    gaps: list[float] = []
    step, score_parts = update_module.policy_step, update_module.token_logprobs_parts
    current: dict = {}

    def spied_step(trainer_, agent, rows, **kwargs):
        current["rows"] = rows if not gaps else None  # the run's first actor step only
        try:
            return step(trainer_, agent, rows, **kwargs)
        finally:
            current["rows"] = None

    def spied_parts(model, prompts, comps, **kwargs):
        for idx, lp in score_parts(model, prompts, comps, **kwargs):
            rows = current.get("rows")
            if rows is not None:  # still at the rollout policy
                for r, i in enumerate(idx):
                    n = len(comps[i])
                    old = torch.tensor(rows.old[i])
                    gaps.append((lp.values[r, :n].detach() - old).abs().max())
            yield idx, lp

    monkeypatch.setattr(ppo_module, "policy_step", spied_step)
    monkeypatch.setattr(update_module, "token_logprobs_parts", spied_parts)
    trainer.train()
    assert gaps and max(gaps).item() < 1e-4, max(gaps).item()
