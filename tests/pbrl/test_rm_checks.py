"""MARLHF's reward-model checks: the held-out split, on-policy accuracy and the RL stop."""

import math

import pytest

from comlrl.core.logging.jsonl import read_metrics
from comlrl.pbrl import MARLHFConfig, MARLHFTrainer
from comlrl.pbrl.pairs import PreferencePair
from comlrl.pbrl.rm_checks import OnPolicyCheck, ranking_agreement, split_heldout

from .helpers import FAST, PROMPTS, ratio_reward, two_agents


def _pair(prompt: str) -> PreferencePair:
    return PreferencePair(
        prompts=[prompt, prompt],
        winner_completions=["a", "bbb"],
        loser_completions=["aa", "b"],
        prompt_ids=[[1], [1]],
        winner_ids=[[2], [3]],
        loser_ids=[[4], [5]],
        winner_reward=1.0,
        loser_reward=0.0,
        candidate_reward_mean=0.5,
    )


def test_split_holds_out_whole_items_and_never_all_of_them():
    pairs = [_pair(f"item {i}") for i in range(5) for _ in range(3)]
    train, held = split_heldout(pairs, 0.4, "seed")
    held_items = {p.prompts[0] for p in held}
    assert len(held_items) == 2 and len(held) == 6
    assert not held_items & {p.prompts[0] for p in train}
    assert split_heldout(pairs, 0.4, "seed")[1] == held  # the seed fixes the draw
    # one item cannot be split; a large share still leaves one item to train on
    assert split_heldout(pairs[:3], 0.5, "s") == (pairs[:3], [])
    train, held = split_heldout(pairs, 0.99, "s")
    assert len({p.prompts[0] for p in train}) == 1
    assert split_heldout(pairs, 0.0, "s") == (pairs, [])


def test_ranking_agreement_against_hand_counts():
    # group 0: task 1 > 0 > 0 (the tie is skipped); the model gets (0,1) right, (0,2) wrong
    # group 1: task 0.2 < 0.5; the model ties them, which counts as wrong
    groups = [[0, 1, 2], [3, 4]]
    model = [2.0, 1.0, 3.0, 0.5, 0.5]
    task = [1.0, 0.0, 0.0, 0.2, 0.5]
    assert ranking_agreement(groups, model, task) == (1, 3)


def test_check_stops_below_the_threshold_and_resets_each_epoch():
    check = OnPolicyCheck()
    check.agree, check.pairs, check.task_sum, check.samples = 3, 4, 2.0, 4
    metrics = check.end_epoch(0.8)
    assert metrics["reward_model/onpolicy_accuracy"] == pytest.approx(0.75)
    assert metrics["reward_model/onpolicy_task_reward"] == pytest.approx(0.5)
    assert check.stopped and metrics["rl/stopped"] == 1.0
    assert check.pairs == 0 and math.isnan(check.end_epoch(None)["reward_model/onpolicy_accuracy"])
    restored = OnPolicyCheck()
    restored.load_state_dict(check.state_dict())
    assert restored.stopped


def _config(tmp_path, **cfg):
    base = {**FAST, "preference_num_candidates": 3, "preference_pairs_per_sample": 2}
    base.update(
        num_train_epochs=3,
        num_generations=2,
        rollout_buffer_size=2,
        reward_num_train_epochs=2,
        reward_learning_rate=1e-3,
        output_dir=str(tmp_path / "run"),
    )
    base.update(cfg)
    return MARLHFConfig(**base)


def test_config_rejects_a_stop_without_the_check_and_a_full_holdout(tmp_path):
    with pytest.raises(ValueError, match="reward_model_onpolicy_check"):
        _config(tmp_path, rl_stop_accuracy=0.6)
    with pytest.raises(ValueError, match="reward_heldout_fraction"):
        _config(tmp_path, reward_heldout_fraction=1.0)


def test_marlhf_logs_heldout_and_onpolicy_accuracy_and_stops(tmp_path):
    agents, tok = two_agents()
    # the tiny reward model never orders every on-policy pair right, so a bar of 1.0 stops the
    # RL phase after its first epoch
    cfg = _config(tmp_path, reward_model_onpolicy_check=True, rl_stop_accuracy=1.0)
    trainer = MARLHFTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:3],
        reward_func=ratio_reward,
        args=cfg,
    )
    trainer.train()
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    rm = [r for r in records if "reward_model/loss" in r]
    assert len(rm) == 2
    assert all(0.0 <= r["reward_model/heldout_accuracy"] <= 1.0 for r in rm)
    assert all(r["reward_model/heldout_pairs"] >= 1 for r in rm)
    checks = [r for r in records if "reward_model/onpolicy_accuracy" in r]
    assert len(checks) == 1 and checks[0]["rl/stopped"] == 1.0
    assert 0.0 <= checks[0]["reward_model/onpolicy_task_reward"] <= 1.0
    assert trainer.rl_stopped
    # three items in batches of one: one epoch of RL batches, then nothing
    batches = [r for r in records if "turn_1/reward_mean" in r]
    assert 1 <= len(batches) <= 3
