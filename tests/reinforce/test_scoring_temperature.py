"""MAGRPO scores its policy, rollout (old) and reference log-probs at the sampling temperature,
without dropout, so the first pass's ratio is 1 even for a model with dropout."""

import torch

import comlrl.core.training.policy_update as update_module
import comlrl.reinforce.magrpo as magrpo_module
from comlrl.core.testing import tiny_pair

from .helpers import make_trainer

T = 0.6


def _by_hand(model, prompt, completion, temperature):
    """``log_softmax(logits / T)`` of one completion, one row, no dropout."""
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    finally:
        model.train(was)
    logp = torch.log_softmax(logits / temperature, -1)
    return torch.tensor([logp[len(prompt) - 1 + t, y].item() for t, y in enumerate(completion)])


def _first_steps(monkeypatch, trainer):
    """For each agent's first optimizer step (still at the rollout policy): its rows, their
    old and reference log-probs, the policy's log-probs as the update scored them, and the
    rows scored by hand at T and at 1 under the policy and the reference."""
    seen: dict[int, dict] = {}
    step = update_module.policy_step
    score_parts = update_module.token_logprobs_parts

    def spied_step(trainer_, agent, policy_rows, **kwargs):
        model = trainer.agents[agent]
        if agent not in seen:
            rows = list(
                zip(policy_rows.prompts, policy_rows.completions, policy_rows.old, policy_rows.ref)
            )
            ref = trainer.reference_models[agent]
            seen[agent] = {
                "rows": rows,
                "new": [],
                "policy_T": [_by_hand(model, p, c, T) for p, c, _, _ in rows],
                "policy_1": [_by_hand(model, p, c, 1.0) for p, c, _, _ in rows],
                "ref_T": [_by_hand(ref, p, c, T) for p, c, _, _ in rows],
            }
            seen[agent]["collecting"] = True
        out = step(trainer_, agent, policy_rows, **kwargs)
        seen[agent]["collecting"] = False
        return out

    def spied_parts(model, prompts, comps, **kwargs):
        agent = next(i for i, m in enumerate(trainer.agents) if m is model)
        for idx, lp in score_parts(model, prompts, comps, **kwargs):
            if seen.get(agent, {}).get("collecting"):
                for r, i in enumerate(idx):
                    seen[agent]["new"].append((i, lp.values[r, : len(comps[i])].detach().clone()))
            yield idx, lp

    monkeypatch.setattr(magrpo_module, "policy_step", spied_step)
    monkeypatch.setattr(update_module, "token_logprobs_parts", spied_parts)
    return seen


def _config(**extra):
    return dict(
        temperature=T,
        policy_loss="ppo",
        beta=0.1,
        num_generations=3,
        train_batch_size=2,
        **extra,
    )


def test_a_seeded_run_at_temperature_0_6_scores_old_new_and_reference_at_0_6(tmp_path, monkeypatch):
    trainer = make_trainer(tmp_path, **_config())
    seen = _first_steps(monkeypatch, trainer)
    trainer.train()
    assert sorted(seen) == [0, 1]
    for record in seen.values():
        rows = record["rows"]
        assert len(record["new"]) == len(rows) > 0
        apart = 0.0
        for k, (_, _, old, ref) in enumerate(rows):
            torch.testing.assert_close(torch.tensor(old), record["policy_T"][k], atol=1e-4, rtol=0)
            torch.testing.assert_close(torch.tensor(ref), record["ref_T"][k], atol=1e-4, rtol=0)
            apart = max(apart, (record["policy_T"][k] - record["policy_1"][k]).abs().max().item())
        for i, new in record["new"]:
            torch.testing.assert_close(new, record["policy_T"][i], atol=1e-4, rtol=0)
        # the check distinguishes the temperatures: T = 1 scores are far from these
        assert apart > 1e-2


def test_with_dropout_the_first_pass_ratio_is_one(tmp_path, monkeypatch):
    """GPT-2's default config has dropout 0.1 (embeddings, attention, residuals): before the fix
    the first pass's token log-ratio reached about 0.17."""
    m0, tok = tiny_pair(arch="gpt2", seed=0)
    m1, _ = tiny_pair(arch="gpt2", seed=1)
    assert m0.config.attn_pdrop == m0.config.resid_pdrop == 0.1
    trainer = make_trainer(tmp_path, agents=[m0, m1], tokenizer=tok, **_config())
    seen = _first_steps(monkeypatch, trainer)
    trainer.train()
    for record in seen.values():
        rows = record["rows"]
        for i, new in record["new"]:
            log_ratio = (new - torch.tensor(rows[i][2])).abs().max().item()
            assert log_ratio < 1e-4, log_ratio
    assert all(m.training for m in trainer.agents)  # training mode itself is left alone
    assert any(
        isinstance(mod, torch.nn.Dropout) and mod.p == 0.1 for mod in trainer.agents[0].modules()
    )  # and the dropout rates come back after the update
