"""MARLHF: the joint reward model, the RL phase through the registry, early validation."""

import math
import random

import pytest
import torch

from comlrl.core.errors import UserError
from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.rollout import rollouts
from comlrl.core.testing import tiny_pair
from comlrl.pbrl import JointRewardModel, MARLHFConfig, MARLHFTrainer
from comlrl.pbrl.reward_model import (
    format_joint_text,
    pair_accuracy,
    score_texts,
    train_reward_model,
)

from .helpers import FAST, PROMPTS, moved, ratio_reward, snapshot, two_agents


def _config(tmp_path, **cfg):
    base = {**FAST, "preference_num_candidates": 3, "preference_pairs_per_sample": 2}
    base.update(
        num_train_epochs=1,
        num_generations=2,
        rollout_buffer_size=2,
        reward_num_train_epochs=2,
        reward_learning_rate=1e-3,
        output_dir=str(tmp_path / "run"),
    )
    base.update(cfg)
    return MARLHFConfig(**base)


def test_joint_text_layout_is_one_based():
    text = format_joint_text(["p0", "p1"], ["c0", "c1"])
    assert text.splitlines()[0] == "Joint multi-agent response"
    assert "Agent 1 prompt:\np0" in text and "Agent 2 response:\nc1" in text


def test_reward_model_has_no_lm_head_and_pools_the_last_real_token():
    model, tok = tiny_pair()
    rm = JointRewardModel.from_source(model, seed=0)
    assert not any("lm_head" in n for n, _ in rm.named_parameters())
    assert rm.backbone is not model.base_model  # a copy: the agent is untouched
    texts = ["short", "a much longer text than the other one"]
    alone = score_texts(rm, tok, texts[:1], None)
    together = score_texts(rm, tok, texts, None)
    assert together[0] == pytest.approx(alone[0], abs=1e-5)  # padding does not change a score
    again = JointRewardModel.from_source(model, seed=0)
    assert torch.equal(again.score_head.weight, rm.score_head.weight)


def _rm_trainer(tmp_path, **cfg):
    """A MARLHF trainer: what the reward-model loop steps through (its config and ranks)."""
    agents, tok = two_agents()
    return MARLHFTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=ratio_reward,
        args=_config(tmp_path, **cfg),
    )


def _bt_texts():
    topics = ["a cat", "the sea", "a robot", "winter", "a garden", "the moon", "a river", "a key"]
    winners, losers = [], []
    for t in topics:
        story = f"Write a story about {t}."
        winners.append(format_joint_text([story, story], ["the fox sang", "a long happy tale"]))
        losers.append(format_joint_text([story, story], ["", "no"]))
    return winners, losers


def test_bradley_terry_accuracy_rises_above_chance(tmp_path):
    model, tok = tiny_pair(seed=3)
    rm = JointRewardModel.from_source(model, seed=0)
    winners, losers = _bt_texts()
    before = pair_accuracy(rm, tok, winners, losers, None)
    opt = torch.optim.AdamW(rm.parameters(), lr=3e-3)
    logged = []
    metrics = train_reward_model(
        rm,
        tok,
        opt,
        winners,
        losers,
        trainer=_rm_trainer(tmp_path),
        epochs=6,
        batch_size=4,
        max_length=None,
        rng=random.Random(0),
        log=logged.append,
    )
    after = pair_accuracy(rm, tok, winners, losers, None)
    assert after > 0.5 and after >= before
    assert metrics["reward_model/accuracy"] > 0.5
    assert logged[-1]["reward_model/loss"] < logged[0]["reward_model/loss"]


def test_reward_model_steps_clip_and_follow_the_nonfinite_policy(tmp_path):
    trainer = _rm_trainer(tmp_path, max_grad_norm=1e-3, nonfinite_loss="skip")
    model, tok = tiny_pair(seed=3)
    rm = JointRewardModel.from_source(model, seed=0)
    winners, losers = _bt_texts()
    opt = torch.optim.SGD(rm.parameters(), lr=1.0)
    norms = []
    trainer.sync.hooks.append(
        lambda params: norms.append(
            float(
                torch.linalg.vector_norm(
                    torch.stack([p.grad.norm() for p in params if p.grad is not None])
                )
            )
        )
    )

    def fit(on):
        train_reward_model(
            rm,
            tok,
            opt,
            winners,
            losers,
            trainer=on,
            epochs=1,
            batch_size=8,
            max_length=None,
            rng=random.Random(0),
        )

    before = [p.detach().clone() for p in rm.parameters()]
    fit(trainer)
    # One SGD step of rate 1 moves the weights by the clipped gradient: norm 1e-3 at most.
    moved_by = torch.linalg.vector_norm(
        torch.stack([(p.detach() - b).norm() for p, b in zip(rm.parameters(), before)])
    )
    assert norms and norms[0] > 1e-3
    assert float(moved_by) == pytest.approx(1e-3, rel=1e-3)

    with torch.no_grad():
        next(rm.parameters()).fill_(float("nan"))
    with pytest.warns(UserWarning, match="Skipping a non-finite reward-model loss"):
        fit(trainer)
    assert trainer.run_state.skipped_nonfinite == 1
    strict = _rm_trainer(tmp_path / "strict")
    with pytest.raises(FloatingPointError, match="reward-model loss"):
        fit(strict)


@pytest.mark.parametrize("algorithm", ["magrpo", "iac"])
def test_marlhf_runs_end_to_end_and_moves_the_agents(tmp_path, algorithm):
    agents, tok = two_agents()
    cfg = _config(tmp_path, rl_algorithm=algorithm, eval_interval=1, eval_num_samples=1)
    trainer = MARLHFTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        eval_dataset=PROMPTS[2:3],
        reward_func=ratio_reward,
        args=cfg,
        critics=[tiny_pair(seed=7)[0], tiny_pair(seed=8)[0]] if algorithm == "iac" else None,
    )
    assert type(trainer.rl_trainer).__name__ == (
        "MAGRPOTrainer" if algorithm == "magrpo" else "IACTrainer"
    )
    assert trainer.rl_trainer.agents[0] is trainer.agents[0]
    before = snapshot(trainer.agents)
    rm_before = snapshot([trainer.reward_model])
    trainer.train()
    assert moved(trainer.agents, before)
    assert moved([trainer.reward_model], rm_before)
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    rm = [r for r in records if "reward_model/loss" in r]
    assert len(rm) == 2 and all(0.0 <= r["reward_model/accuracy"] <= 1.0 for r in rm)
    train = [r for r in records if "turn_1/reward_mean" in r]
    assert train and all(math.isfinite(r["turn_1/reward_mean"]) for r in train)
    evals = [r for r in records if "eval/turn_1/reward_mean" in r]
    assert evals  # eval uses the task reward: values lie in its range
    assert all(0.0 <= r["eval/turn_1/reward_mean"] <= 1.0 for r in evals)
    steps = [r["step"] for r in records]
    assert steps == sorted(steps)
    assert trainer.env_step == trainer.rl_trainer.env_step > 0


def test_reward_model_scores_drive_the_rl_phase(tmp_path):
    agents, tok = two_agents()
    trainer = MARLHFTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:1],
        reward_func=ratio_reward,
        args=_config(tmp_path),
    )
    completions = [["a b", "c"], ["d", "e f g"]]
    via_rl = rollouts.score(
        trainer.rl_trainer,
        completions,
        prompts=[PROMPTS[0]["prompt"]] * 2,
        batch_items=[PROMPTS[0]] * 2,
    )
    direct = trainer.reward_model_scores(
        [[PROMPTS[0]["prompt"]] * 2, [PROMPTS[0]["prompt"]] * 2], completions
    )
    assert via_rl == pytest.approx(direct)
    task = rollouts.score(
        trainer, completions, prompts=[PROMPTS[0]["prompt"]] * 2, batch_items=[PROMPTS[0]] * 2
    )
    assert task == pytest.approx(ratio_reward(*completions))


def test_missing_rl_package_names_the_package(tmp_path, monkeypatch):
    import comlrl.core.plugins as registry

    real = registry._group
    monkeypatch.setattr(
        registry, "_group", lambda name: {k: v for k, v in real(name).items() if k != "maac"}
    )
    agents, tok = two_agents()
    with pytest.raises(ValueError, match="pip install comlrl-ac"):
        MARLHFTrainer(
            agents=agents,
            tokenizer=tok,
            reward_func=ratio_reward,
            args=_config(tmp_path, rl_algorithm="maac"),
        )


def test_sources_and_devices_fail_in_init_before_any_generation(tmp_path, monkeypatch):
    from comlrl.core.rollout import rollouts as rollouts_module

    def no_generation(*args, **kwargs):
        raise AssertionError("generation must not start")

    # Every rollout of every trainer samples through the rollouts' generate_per_agent.
    monkeypatch.setattr(rollouts_module, "generate_per_agent", no_generation)
    agents, tok = two_agents()
    with pytest.raises(ValueError, match="critic"):
        MARLHFTrainer(
            agents=agents,
            tokenizer=tok,
            reward_func=ratio_reward,
            args=_config(tmp_path, rl_algorithm="maac"),
        )
    # A source transformers cannot open is a user error naming the field (see comlrl.core.errors).
    with pytest.raises(UserError, match="reward_model"):
        MARLHFTrainer(
            agents=agents,
            tokenizer=tok,
            reward_func=ratio_reward,
            args=_config(tmp_path, reward_model_name=str(tmp_path / "missing")),
        )
    with pytest.raises(ValueError, match="reward_model_device"):
        _config(tmp_path, reward_model_device="tpu:banana")


def test_no_pairs_samples_once_and_skips_rl(tmp_path, monkeypatch):
    agents, tok = two_agents()
    trainer = MARLHFTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:1],
        reward_func=lambda a, b: [0.5] * len(a),
        args=_config(tmp_path, num_train_epochs=3),
    )
    calls = []
    original = trainer.build_policy_pairs
    monkeypatch.setattr(
        trainer, "build_policy_pairs", lambda *a, **k: calls.append(1) or original(*a, **k)
    )
    before = snapshot(trainer.agents)
    with pytest.warns(UserWarning, match="no preference pairs"):
        trainer.train()
    assert calls == [1] and not trainer.reward_model_trained
    assert not moved(trainer.agents, before) and trainer.env_step == 0
