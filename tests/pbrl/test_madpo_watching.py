"""Watching a MADPO run: its completions log holds the trained pairs (chosen/rejected), and the
final evaluation comes after the last DPO update."""

import json

from comlrl.core.logging.completions import COMPLETIONS_FILE
from comlrl.core.logging.jsonl import read_metrics
from comlrl.pbrl import MADPOConfig, MADPOTrainer

from .helpers import FAST, PROMPTS, ratio_reward, two_agents


def test_madpo_logs_pairs_and_evaluates_after_the_last_update(tmp_path):
    agents, tok = two_agents()
    cfg = {**FAST, "preference_num_candidates": 3, "preference_pairs_per_sample": 2}
    cfg.update(
        num_train_epochs=1,
        train_batch_size=2,
        output_dir=str(tmp_path / "run"),
        log_completions=1,
        eval_interval=100,
        eval_num_samples=1,
    )
    trainer = MADPOTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        eval_dataset=PROMPTS[2:],
        reward_func=ratio_reward,
        args=MADPOConfig(**cfg),
    )
    trainer.train()
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / COMPLETIONS_FILE).read_text().splitlines()]
    records = read_metrics(run / "metrics.jsonl")
    updates = [i for i, r in enumerate(records) if "dpo/loss" in r]
    assert [r["record"] for r in rows] == updates  # one row per logged update
    pairs = {
        (tuple(p.winner_completions), tuple(p.loser_completions)) for p in trainer.preference_pairs
    }
    for row in rows:
        assert (tuple(row["chosen"]), tuple(row["rejected"])) in pairs
        assert row["chosen_reward"] > row["rejected_reward"]
        assert len(row["prompts"]) == 2
    # The cadence evaluates before the first update (after the pair-sampling record).
    assert any("eval/turn_1/reward_mean" in r for r in records[: updates[0]])
    assert "eval/turn_1/reward_mean" in records[-1] and updates[-1] == len(records) - 2


def test_marlhf_rl_phase_logs_its_completions_and_evaluates_at_the_end(tmp_path):
    from comlrl.pbrl import MARLHFConfig, MARLHFTrainer

    agents, tok = two_agents()
    cfg = {**FAST, "preference_num_candidates": 3, "preference_pairs_per_sample": 2}
    cfg.update(
        num_train_epochs=1,
        num_generations=2,
        rollout_buffer_size=2,
        reward_num_train_epochs=1,
        output_dir=str(tmp_path / "run"),
        log_completions=2,
        eval_interval=100,
        eval_num_samples=1,
    )
    trainer = MARLHFTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        eval_dataset=PROMPTS[2:3],
        reward_func=ratio_reward,
        args=MARLHFConfig(**cfg),
    )
    trainer.train()
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / COMPLETIONS_FILE).read_text().splitlines()]
    records = read_metrics(run / "metrics.jsonl")
    assert rows and all("turn_1/reward_mean" in records[r["record"]] for r in rows)
    assert all(len(r["completions"]) == 2 and len(r["advantages"]) == 2 for r in rows)
    last_train = max(i for i, r in enumerate(records) if "turn_1/reward_mean" in r)
    assert last_train < len(records) - 1 and "eval/turn_1/reward_mean" in records[-1]
