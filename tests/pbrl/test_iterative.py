"""MADPOIter and MARLHFIter: comparator policies, replay modes, drift logging, env steps."""

import json
import os
import random
import time
import xml.etree.ElementTree as ET

import pytest

from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.testing import tiny_pair
from comlrl.pbrl import (
    MADPOIterConfig,
    MADPOIterTrainer,
    MARLHFIterConfig,
    MARLHFIterTrainer,
    PreferencePair,
)
from comlrl.pbrl.drift import RewardHistogram
from comlrl.pbrl.replay import ReplayStore, shard_weights
from comlrl.pbrl.snapshots import history_snapshot

from .helpers import FAST, PROMPTS, moved, ratio_reward, snapshot, two_agents

REPLAY = {
    "nearest_k": {"preference_replay_k": 1},
    "all_history": {"preference_replay_sample_size": 3},
    "lambda_decay": {"preference_replay_lambda": 0.5},
    "current": {},
}


def _iter_config(cls, tmp_path, policy, mode, **cfg):
    base = {**FAST, "num_iterations": 2, "preference_num_candidates": 3}
    base.update(
        preference_pairs_per_sample=2,
        comparator_num_candidates=3,
        comparator_policy=policy,
        preference_replay_mode=mode,
        log_reward_distribution=True,
        output_dir=str(tmp_path / "run"),
        **REPLAY[mode],
    )
    base.update(cfg)
    return cls(**base)


def _record_stage_ends(trainer, monkeypatch):
    seen = []
    original = trainer.end_stage

    def finish(stage):
        rl = getattr(trainer, "rl_trainer", None)
        seen.append((trainer.env_step, rl.env_step if rl is not None else None))
        original(stage)

    monkeypatch.setattr(trainer, "end_stage", finish)
    return seen


def _check_drift_files(run):
    for it in (1, 2):
        with open(run / "reward_distributions" / f"iteration_{it:04d}.json") as fh:
            record = json.load(fh)
        assert record["iteration"] == it and record["num_bins"] == 16
        assert len(record["bin_edges"]) == 17 and (record["reward_min"], record["reward_max"]) == (
            0.0,
            1.0,
        )
        cand = record["candidate"]
        assert cand["target"]["sample_count"] == 2 * 3  # items x candidates
        assert sum(cand["comparator"]["counts"]) == cand["comparator"]["sample_count"] == 6
        root = ET.parse(run / "reward_distributions" / f"iteration_{it:04d}.svg").getroot()
        assert root.tag.endswith("svg") and len(list(root.iter())) > 20
        png = run / "reward_distributions" / f"iteration_{it:04d}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("policy", "mode", "extra"),
    [
        ("current", "nearest_k", {}),
        ("current_copy", "all_history", {"comparator_devices": "cpu:0"}),
        ("history", "lambda_decay", {}),
        ("model", "current", {"comparator_pairing": "cross"}),
    ],
)
def test_madpo_iter_completes_two_iterations(tmp_path, monkeypatch, tiny_dir, policy, mode, extra):
    if policy == "model":
        extra = {**extra, "comparator_model_name": tiny_dir}
    agents, tok = two_agents()
    cfg = _iter_config(MADPOIterConfig, tmp_path, policy, mode, **extra)
    trainer = MADPOIterTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=ratio_reward, args=cfg
    )
    ends = _record_stage_ends(trainer, monkeypatch)
    before = snapshot(trainer.agents)
    trainer.train()
    assert trainer.prepared_stage == 1 and len(ends) == 2
    assert moved(trainer.agents, before)
    assert ends[0][0] < ends[1][0]  # env_step keeps counting across iterations
    run = tmp_path / "run"
    records = read_metrics(run / "metrics.jsonl")
    iters = [r for r in records if "iter/current_iteration" in r]
    assert [r["iter/current_iteration"] for r in iters] == [1.0, 2.0]
    assert iters[0]["step"] < iters[1]["step"]
    assert all(r["iter/reward_distribution/target_sample_count"] == 6 for r in iters)
    assert [r["step"] for r in records] == sorted(r["step"] for r in records)
    _check_drift_files(run)
    replay = run / "preference_replay"
    if mode == "current":
        assert not replay.exists()  # nothing to replay: nothing written
    else:
        assert sorted(os.listdir(replay)) == ["iteration_0001.jsonl", "iteration_0002.jsonl"]
    if policy == "history":
        assert {"initial", "iteration_0001", "iteration_0002"} <= set(
            os.listdir(run / "policy_checkpoints")
        )
    for pair in trainer.iteration_pairs:
        assert pair.iteration in (1, 2) and pair.target_is_winner is not None
        assert pair.winner_reward > pair.loser_reward


def test_marlhf_iter_keeps_one_env_step_across_inner_trainers(tmp_path, monkeypatch):
    agents, tok = two_agents()
    cfg = _iter_config(
        MARLHFIterConfig,
        tmp_path,
        "current",
        "lambda_decay",
        num_train_epochs=1,
        num_generations=2,
        rollout_buffer_size=2,
        reward_num_train_epochs=1,
        preference_scoring_reward="reward_model",
    )
    trainer = MARLHFIterTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=ratio_reward, args=cfg
    )
    ends = _record_stage_ends(trainer, monkeypatch)
    before = snapshot(trainer.agents)
    trainer.train()
    assert moved(trainer.agents, before)
    assert len(ends) == 2
    assert ends[0][0] == ends[0][1] and ends[1][0] == ends[1][1]
    assert 0 < ends[0][0] < ends[1][0]
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    rl_steps = [r["step"] for r in records if "turn_1/reward_mean" in r]
    iter2 = next(r["step"] for r in records if r.get("iter/current_iteration") == 2.0)
    assert rl_steps and max(rl_steps) > iter2 >= min(rl_steps)
    assert len([r for r in records if "reward_model/loss" in r]) == 2
    _check_drift_files(tmp_path / "run")


class _Garbage:
    """Adapter whose prompt is fine but whose parse never finds a section."""

    def build_prompt(self, item, prompts):
        return "Answer for all: " + " | ".join(prompts)

    def parse_completion(self, completion, item, num_agents):
        from comlrl.pbrl import CentralizedComparatorParseError

        raise CentralizedComparatorParseError("no sections")


def test_centralized_comparator_parse_failures_are_counted_not_raised(tmp_path):
    agents, tok = two_agents()
    cfg = _iter_config(
        MADPOIterConfig,
        tmp_path,
        "current",
        "current",
        num_iterations=1,
        comparator_generation_mode="centralized",
        comparator_centralized_agent_index=1,
        log_reward_distribution=False,
    )
    trainer = MADPOIterTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=ratio_reward,
        args=cfg,
        centralized_comparator_adapter=_Garbage(),
    )
    trainer.train()
    assert trainer.online.comparators.splitter.parse_failures == 2 * 3  # every joint completion
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    it = next(r for r in records if "iter/current_iteration" in r)
    assert it["iter/comparator_parse_failures"] == 6.0
    eos = tok.eos_token_id
    for pair in trainer.iteration_pairs:
        comp = pair.loser_ids if pair.target_is_winner else pair.winner_ids
        assert comp == [[eos], [eos]]  # empty outputs, EOS appended


def _pairs(n, tag):
    return [
        PreferencePair(
            prompts=["p"],
            winner_completions=[f"{tag}-{i}"],
            loser_completions=["l"],
            prompt_ids=[[1, 2]],
            winner_ids=[[3, i]],
            loser_ids=[[4]],
            winner_reward=1.0,
            loser_reward=0.0,
            candidate_reward_mean=0.5,
        )
        for i in range(n)
    ]


def test_replay_modes_draw_from_the_right_shards(tmp_path):
    near = ReplayStore("nearest_k", 1, None, None, str(tmp_path / "a"), seed=0)
    near.add(1, _pairs(3, "old"))
    near.add(2, _pairs(2, "new"))
    picked = near.select(_pairs(2, "new"))
    assert len(picked) == 2 and {p.winner_completions[0][:3] for p in picked} == {"new"}
    assert picked[0].winner_ids[0][0] == 3  # token ids come back from the shard
    every = ReplayStore("all_history", None, None, 5, str(tmp_path / "b"), seed=0)
    every.add(1, _pairs(3, "old"))
    every.add(2, [])
    every.add(3, _pairs(3, "new"))
    assert len(every.shards) == 2  # empty iterations are not registered
    drawn = every.select([])
    assert len(drawn) == 5
    assert len({p.winner_completions[0] for p in drawn}) >= 3
    state = every.state_dict()
    again = ReplayStore("all_history", None, None, 5, str(tmp_path / "b"), seed=123)
    again.load_state_dict(state)
    assert [p.winner_completions for p in again.select([])] == [
        p.winner_completions for p in every.select([])
    ]


def test_lambda_weights():
    assert shard_weights(3, "lambda_decay", 0.5) == pytest.approx([1 / 7, 2 / 7, 4 / 7])
    assert shard_weights(3, "lambda_decay", 1.0) == pytest.approx([1 / 3] * 3)
    assert shard_weights(3, "lambda_decay", 0.0) == pytest.approx([0, 0, 1])
    assert shard_weights(2, "all_history", None) == [0.5, 0.5]


def test_histogram_clips_out_of_range_values():
    hist = RewardHistogram(0.0, 1.0)
    counts = hist.counts([-5.0, 0.0, 0.99, 1.0, 7.0, 0.5])
    assert counts[0] == 2 and counts[-1] == 3 and counts[8] == 1 and sum(counts) == 6


def test_history_snapshot_falls_back_to_older_policies(tmp_path):
    for name in ("initial", "iteration_0001", "iteration_0003"):
        os.makedirs(tmp_path / name)
    assert history_snapshot(str(tmp_path), 5, 1).endswith("iteration_0003")
    assert history_snapshot(str(tmp_path), 3, 1).endswith("iteration_0001")  # 2 missing
    assert history_snapshot(str(tmp_path), 2, 3).endswith("initial")


def test_log_reward_distribution_needs_a_reward_range(tmp_path):
    agents, tok = two_agents()
    with pytest.raises(ValueError, match="reward_range"):
        MADPOIterTrainer(
            agents=agents,
            tokenizer=tok,
            reward_func=lambda a, b: [0.0] * len(a),
            args=_iter_config(MADPOIterConfig, tmp_path, "current", "current"),
        )


def test_model_comparator_objects_keep_token_ids(tmp_path):
    agents, tok = two_agents()
    other = tiny_pair(seed=9)[0]
    cfg = _iter_config(
        MADPOIterConfig,
        tmp_path,
        "model",
        "current",
        num_iterations=1,
        comparator_agents=[other],
        log_reward_distribution=False,
    )
    trainer = MADPOIterTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:1], reward_func=ratio_reward, args=cfg
    )
    assert all(keep for _, _, keep in trainer.online.comparators.model_comparators.values())
    assert not any(p.requires_grad for p in other.parameters())
    random.seed(0)
    trainer.train()
    assert trainer.iteration_pairs


def test_drift_record_metrics_and_wandb_plots():
    from comlrl.pbrl import drift

    hist = RewardHistogram(-1.0, 1.0)
    record = drift.iteration_record(
        hist,
        3,
        {"target": [0.1, 0.9], "comparator": [-0.5]},
        {"target": [0.9], "comparator": []},
        1,
    )
    metrics = drift.summary_metrics(record)
    assert metrics["iter/reward_distribution/target_mean"] == pytest.approx(0.5)
    assert metrics["iter/selected_reward_distribution/pair_count"] == 1.0
    assert "iter/selected_reward_distribution/comparator_mean" not in metrics  # no samples

    plots = drift.html_plots(record)
    assert set(plots) == {
        f"iter/{ns}/iteration_0003/{kind}_plot"
        for ns in ("reward_distribution", "selected_reward_distribution")
        for kind in ("line", "bar")
    }
    for value in plots.values():
        root = ET.fromstring(value)
        assert root.attrib["width"] == "240" and root.attrib["height"] == "80"


def test_drift_plots_reach_wandb(tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    agents, tok = two_agents()
    cfg = _iter_config(MADPOIterConfig, tmp_path, "current", "current", num_iterations=1)
    cfg.report_to = ["wandb"]  # report_to alone turns W&B on
    trainer = MADPOIterTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=ratio_reward,
        args=cfg,
        wandb_config={"project": "comlrl-test", "dir": str(tmp_path / "wb"), "name": "drift"},
    )
    trainer.train()
    run_id = trainer.reporting.logger.wandb_run_id
    trainer.reporting.logger.close()
    keys = (
        "iter/current_iteration",
        "iter/reward_distribution/target_mean",
        "iter/reward_distribution/iteration_0001/bar_plot",
        "iter/selected_reward_distribution/iteration_0001/line_plot",
    )
    # W&B's background writer flushes the offline log after finish(); wait for it.
    deadline, blob = time.monotonic() + 60.0, b""
    while time.monotonic() < deadline:
        files = list(Path(tmp_path / "wb").rglob(f"run-{run_id}.wandb"))
        blob = files[0].read_bytes() if files else b""
        if all(k.encode() in blob for k in keys):
            break
        time.sleep(0.5)
    for key in keys:
        assert key.encode() in blob, key
