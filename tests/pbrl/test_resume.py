"""Resuming MADPO and MADPOIter from a checkpoint equals an uninterrupted run."""

import glob
import json
import os

import torch

from comlrl.core.logging.jsonl import read_metrics
from comlrl.pbrl import MADPOConfig, MADPOIterConfig, MADPOIterTrainer, MADPOTrainer

from .helpers import FAST, PROMPTS, ratio_reward, small_marlhf, two_agents


def _checkpoints(directory):
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "checkpoint-*"))):
        with open(os.path.join(path, "manifest.json")) as fh:
            manifest = json.load(fh)
        out.append((path, manifest["reason"], manifest["cursor"]))
    return out


def _weights(trainer):
    return [p.detach().clone() for m in trainer.agents for p in m.parameters()]


def _untimed(records):
    """Metric records without wall-clock measurements (those differ between runs)."""
    return [
        {k: v for k, v in r.items() if not k.startswith(("timing/", "throughput/"))}
        for r in records
    ]


def _assert_same_run(a_weights, a_records, resumed, run_dir):
    b_weights = _weights(resumed)
    assert all(torch.equal(x, y) for x, y in zip(a_weights, b_weights))
    resumed_records = read_metrics(os.path.join(run_dir, "metrics.jsonl"))
    assert _untimed(resumed_records) == _untimed(a_records)


def _madpo(run_dir):
    agents, tok = two_agents()
    cfg = MADPOConfig(
        **FAST,
        num_train_epochs=2,
        preference_num_candidates=3,
        preference_pairs_per_sample=2,
        train_batch_size=2,
        output_dir=run_dir,
    )
    trainer = MADPOTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=ratio_reward, args=cfg
    )
    trainer.verbose = False
    return trainer


def test_madpo_resume_equals_uninterrupted(tmp_path):
    run, ckpt = str(tmp_path / "run"), str(tmp_path / "ckpt")
    full = _madpo(run)
    full.train(checkpoint_dir=ckpt, checkpoint_every_batches=1)
    weights, records = _weights(full), read_metrics(os.path.join(run, "metrics.jsonl"))
    points = _checkpoints(ckpt)
    assert points[0][1] == "preference_data"  # the sampled pairs are saved first
    middle = [p for p in points if p[2]["epoch"] == 0 and p[2]["position"] == 1]
    assert middle, points
    for path in (points[0][0], middle[0][0]):
        resumed = _madpo(run)
        resumed.train(resume_from_checkpoint=path)
        assert resumed.preference_pairs is not None
        _assert_same_run(weights, records, resumed, run)
        assert resumed.env_step == full.env_step and resumed.updates_seen == full.updates_seen


def _madpo_iter(run_dir):
    agents, tok = two_agents()
    cfg = MADPOIterConfig(
        **FAST,
        num_iterations=2,
        num_train_epochs=2,
        preference_num_candidates=3,
        preference_pairs_per_sample=2,
        comparator_policy="history",
        preference_replay_mode="nearest_k",
        preference_replay_k=2,
        log_reward_distribution=True,
        output_dir=run_dir,
    )
    trainer = MADPOIterTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=ratio_reward, args=cfg
    )
    trainer.verbose = False
    return trainer


def test_iterative_resume_equals_uninterrupted(tmp_path):
    run, ckpt = str(tmp_path / "run"), str(tmp_path / "ckpt")
    full = _madpo_iter(run)
    full.train(checkpoint_dir=ckpt, checkpoint_every_batches=1)
    weights, records = _weights(full), read_metrics(os.path.join(run, "metrics.jsonl"))
    with open(os.path.join(run, "reward_distributions", "iteration_0002.json")) as fh:
        drift = json.load(fh)
    points = _checkpoints(ckpt)
    second = [p for p in points if p[2]["epoch"] == 1]
    data = [p for p in second if p[1] == "preference_data"]
    inside = [p for p in second if p[2]["position"] == 2]
    boundary = [p for p in points if p[2]["epoch"] == 1 and p[1] == "epoch"]
    assert data and inside and boundary, points
    for path in (boundary[0][0], data[0][0], inside[0][0]):
        resumed = _madpo_iter(run)
        resumed.train(resume_from_checkpoint=path)
        _assert_same_run(weights, records, resumed, run)
        assert resumed.online.comparators.calls == full.online.comparators.calls
        with open(os.path.join(run, "reward_distributions", "iteration_0002.json")) as fh:
            assert json.load(fh) == drift


def test_marlhf_resume_equals_uninterrupted(tmp_path):
    run, ckpt = str(tmp_path / "run"), str(tmp_path / "ckpt")
    # The on-policy check's metrics are part of the comparison: each RL batch is scored once,
    # before and after the interruption.
    full = small_marlhf(run, reward_model_onpolicy_check=True)
    full.train(checkpoint_dir=ckpt, checkpoint_every_batches=1)
    weights, records = _weights(full), read_metrics(os.path.join(run, "metrics.jsonl"))
    assert any("reward_model/onpolicy_task_reward" in r for r in records)
    rm = [p.detach().clone() for p in full.reward_model.parameters()]
    points = _checkpoints(ckpt)
    inside = [p for p in points if p[2]["epoch"] == 0 and p[2]["position"] == 1]
    assert points[0][1] == "preference_data" and inside, points
    resumed = small_marlhf(run, reward_model_onpolicy_check=True)
    resumed.train(resume_from_checkpoint=inside[0][0])
    assert resumed.reward_model_trained
    assert all(torch.equal(a, b) for a, b in zip(rm, resumed.reward_model.parameters()))
    _assert_same_run(weights, records, resumed, run)
    assert resumed.env_step == full.env_step == resumed.rl_trainer.env_step
