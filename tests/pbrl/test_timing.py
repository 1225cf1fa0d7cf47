"""timing/* and throughput/tokens_per_s in the preference trainers' training records.

Only presence and sanity are checked (non-negative, finite, in the right records, evaluation
left out); never how long anything took.
"""

import math

import pytest

from comlrl.core.logging.jsonl import read_metrics
from comlrl.pbrl import MADPOConfig, MADPOIterConfig, MADPOIterTrainer, MADPOTrainer

from .helpers import FAST, PROMPTS, ratio_reward, two_agents

KEYS = ("timing/generate", "timing/reward", "timing/update", "throughput/tokens_per_s")


def _sane(record):
    for key in KEYS:
        assert key in record, key
        assert math.isfinite(record[key]) and record[key] >= 0.0, (key, record[key])


def _generated_token_bounds(items, candidates, agents, max_new_tokens):
    rows = items * candidates * agents
    return rows, rows * max_new_tokens  # each row has 1 .. max_new_tokens tokens


def test_madpo_records_carry_timings_and_throughput(tmp_path):
    agents, tok = two_agents()
    args = MADPOConfig(
        **{**FAST, "eval_interval": 1, "eval_num_samples": 1},
        preference_num_candidates=3,
        preference_pairs_per_sample=2,
        num_train_epochs=2,
        train_batch_size=2,
        output_dir=str(tmp_path / "run"),
    )
    trainer = MADPOTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        eval_dataset=PROMPTS[2:],
        reward_func=ratio_reward,
        args=args,
    )
    trainer.train()
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    sampled = [r for r in records if "preference/num_pairs" in r]
    assert len(sampled) == 1
    first = sampled[0]
    _sane(first)
    # The pair data's record covers sampling and scoring the candidates.
    assert first["timing/generate"] > 0.0 and first["timing/reward"] > 0.0
    assert first["throughput/tokens_per_s"] > 0.0
    elapsed = sum(first[k] for k in KEYS[:3])
    low, high = _generated_token_bounds(2, 3, 2, FAST["max_new_tokens"])
    assert low <= round(first["throughput/tokens_per_s"] * elapsed) <= high
    updates = [r for r in records if "dpo/loss" in r]
    assert updates
    for r in updates:
        _sane(r)
        assert r["timing/update"] > 0.0
        # Evaluation runs between the updates (eval_interval=1) and samples, but its time
        # never enters the training timings: no training sampling happens here.
        assert r["timing/generate"] == 0.0 and r["timing/reward"] == 0.0
        assert r["throughput/tokens_per_s"] == 0.0
    evals = [r for r in records if "eval/turn_1/reward_mean" in r]
    assert evals and not any(k in r for r in evals for k in KEYS)


def test_madpo_iter_counts_comparator_sampling_as_generation(tmp_path):
    agents, tok = two_agents()
    args = MADPOIterConfig(
        **FAST,
        num_iterations=2,
        preference_num_candidates=3,
        comparator_num_candidates=3,
        preference_pairs_per_sample=2,
        comparator_policy="current",
        preference_replay_mode="current",
        output_dir=str(tmp_path / "run"),
    )
    trainer = MADPOIterTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=ratio_reward, args=args
    )
    trainer.train()
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    iters = [r for r in records if "iter/current_iteration" in r]
    assert len(iters) == 2
    for r in iters:
        _sane(r)
        assert r["timing/generate"] > 0.0 and r["timing/reward"] > 0.0
        elapsed = sum(r[k] for k in KEYS[:3])
        # target and comparator candidates: twice the rows of one side
        low, high = _generated_token_bounds(2, 3, 2, FAST["max_new_tokens"])
        assert 2 * low <= round(r["throughput/tokens_per_s"] * elapsed) <= 2 * high
    updates = [r for r in records if "dpo/loss" in r]
    assert updates and all(r["timing/update"] > 0.0 for r in updates)
    for r in updates:
        _sane(r)


def test_marlhf_reward_model_epochs_report_update_time(tmp_path):
    pytest.importorskip("comlrl.reinforce")
    from comlrl.pbrl import MARLHFConfig, MARLHFTrainer

    agents, tok = two_agents()
    args = MARLHFConfig(
        **FAST,
        rl_algorithm="magrpo",
        preference_num_candidates=3,
        preference_pairs_per_sample=2,
        reward_num_train_epochs=2,
        reward_learning_rate=1e-3,
        num_train_epochs=1,
        num_generations=2,
        rollout_buffer_size=2,
        output_dir=str(tmp_path / "run"),
    )
    trainer = MARLHFTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=ratio_reward, args=args
    )
    trainer.train()
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    sampled = next(r for r in records if "preference/num_pairs" in r)
    _sane(sampled)
    assert sampled["timing/generate"] > 0.0 and sampled["throughput/tokens_per_s"] > 0.0
    fits = [r for r in records if "reward_model/loss" in r]
    assert len(fits) == 2
    for r in fits:
        _sane(r)
        assert r["timing/update"] > 0.0
    # The RL phase's records come from the RL trainer, which reports its own timings.
    rl = [r for r in records if "turn_1/reward_mean" in r]
    assert rl and all("timing/generate" in r for r in rl)


def test_nested_timed_blocks_count_once(tmp_path, monkeypatch):
    agents, tok = two_agents()
    trainer = MADPOTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=ratio_reward,
        args=MADPOConfig(**FAST, output_dir=str(tmp_path / "run")),
    )
    import comlrl.core.loop.timing as timing

    # outer block starts at 0, inner at 1; only the outer block's end (3) is read
    clock = iter([0.0, 1.0, 3.0])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    with trainer.timing.phase("update"), trainer.timing.phase("update"):
        pass
    monkeypatch.undo()
    assert trainer.reporting.take_timings()["timing/update"] == 3.0
    assert trainer.reporting.take_timings()["timing/update"] == 0.0  # taken: reset
