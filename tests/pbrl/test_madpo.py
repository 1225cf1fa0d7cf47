"""MADPO end to end on tiny CPU models."""

import math

import pytest

from comlrl.core.logging.jsonl import read_metrics
from comlrl.pbrl import MADPOConfig, MADPOTrainer, PreferencePair
from comlrl.pbrl.pairs import candidate_pairs, select_pairs

from .helpers import FAST, PROMPTS, moved, ratio_reward, snapshot, two_agents


def _trainer(tmp_path, **cfg):
    agents, tok = two_agents()
    base = {**FAST, "preference_num_candidates": 3, "preference_pairs_per_sample": 2}
    base.update(num_train_epochs=2, train_batch_size=2, output_dir=str(tmp_path / "run"))
    base.update(cfg)
    return MADPOTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        eval_dataset=PROMPTS[2:],
        reward_func=ratio_reward,
        args=MADPOConfig(**base),
    )


def test_madpo_trains_and_logs_dpo_metrics(tmp_path):
    trainer = _trainer(tmp_path, eval_interval=2, eval_num_samples=1)
    before = snapshot(trainer.agents)
    trainer.train()
    assert moved(trainer.agents, before)
    pairs = trainer.preference_pairs
    assert pairs and all(isinstance(p, PreferencePair) for p in pairs)
    for p in pairs:
        assert p.winner_reward > p.loser_reward
        assert len(p.prompt_ids) == len(p.winner_ids) == len(p.loser_ids) == 2
        assert all(ids for ids in p.winner_ids)
    updates = math.ceil(len(pairs) / 2) * 2
    assert trainer.updates_seen == updates
    assert trainer.env_step == 2 * 2 * len(pairs)  # steps_per_pair x pairs x epochs
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    dpo = [r for r in records if "dpo/loss" in r]
    assert len(dpo) == updates
    for key in ("dpo/accuracy", "dpo/margin", "dpo/reward_margin", "agent_1/rejected_logp"):
        assert all(math.isfinite(r[key]) for r in dpo)
    assert any("eval/turn_1/reward_mean" in r for r in records)
    assert [r["step"] for r in records] == sorted(r["step"] for r in records)


def test_pairs_keep_the_sampled_token_ids(tmp_path):
    trainer = _trainer(tmp_path, num_train_epochs=1)
    trainer.train()
    tok = trainer.tokenizers[0]
    for p in trainer.preference_pairs:
        for i in range(2):
            assert tok.decode(p.winner_ids[i], skip_special_tokens=True) == p.winner_completions[i]
            assert p.prompt_ids[i] == tok(p.prompts[i])["input_ids"]


def test_pair_selection_modes():
    rewards = [0.2, 0.9, 0.2, 0.5]
    pairs = candidate_pairs(rewards)
    assert all(rewards[w] > rewards[lo] for w, lo, _ in pairs)
    assert len(pairs) == 5  # ties dropped
    import random

    gap = select_pairs(pairs, "reward_gap", 2, random.Random(0))
    assert [g for _, _, g in gap] == pytest.approx([0.7, 0.7])
    assert select_pairs(pairs, "all", None, random.Random(0)) == sorted(pairs)
    rand = select_pairs(pairs, "random", 3, random.Random(1))
    assert len(rand) == 3 and set(rand) <= set(pairs)


def test_no_pairs_warns_and_skips_training(tmp_path):
    agents, tok = two_agents()
    trainer = MADPOTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:1],
        reward_func=lambda a, b: [1.0] * len(a),
        args=MADPOConfig(**FAST, preference_num_candidates=2, output_dir=str(tmp_path)),
    )
    before = snapshot(trainer.agents)
    with pytest.warns(UserWarning, match="no preference pairs"):
        trainer.train()
    assert trainer.preference_pairs == [] and trainer.updates_seen == 0
    assert not moved(trainer.agents, before)


def test_config_and_constructor_errors(tmp_path):
    agents, tok = two_agents()
    with pytest.raises(ValueError, match="num_agents"):
        MADPOTrainer(
            agents=agents,
            tokenizer=tok,
            reward_func=ratio_reward,
            args=MADPOConfig(num_agents=3, output_dir=str(tmp_path)),
        )
    with pytest.raises(TypeError, match="centralized_comparator_adapter.build_prompt"):
        MADPOTrainer(
            agents=agents,
            tokenizer=tok,
            reward_func=ratio_reward,
            args=MADPOConfig(output_dir=str(tmp_path)),
            centralized_comparator_adapter=object(),
        )
    with pytest.raises(ValueError, match="MADPOConfig"):
        MADPOTrainer(agents=agents, tokenizer=tok, reward_func=ratio_reward, args=object())


def test_reference_is_the_initial_policy_with_cached_logprobs(tmp_path):
    trainer = _trainer(tmp_path, reference_free=False, num_train_epochs=1, train_batch_size=64)
    trainer.train()
    assert all(
        p.reference_logps is not None and len(p.reference_logps) == 2
        for p in trainer.preference_pairs
    )
    first = next(r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "dpo/loss" in r)
    # The first update sees policy == reference: every margin is zero, the loss is log 2.
    assert first["dpo/margin"] == pytest.approx(0.0, abs=1e-4)
    assert first["dpo/loss"] == pytest.approx(math.log(2.0), abs=1e-4)


def test_reference_model_name_is_checked_in_init_and_used(tmp_path, tiny_dir):
    agents, tok = two_agents()
    with pytest.raises(ValueError, match="reference_model_name"):
        MADPOTrainer(
            agents=agents,
            tokenizer=tok,
            reward_func=ratio_reward,
            args=MADPOConfig(reference_free=False, reference_model_name=str(tmp_path / "nope")),
        )
    trainer = _trainer(
        tmp_path, reference_free=False, reference_model_name=tiny_dir, num_train_epochs=1
    )
    trainer.train()
    assert trainer.preference_pairs and all(p.reference_logps for p in trainer.preference_pairs)


def test_a_trainer_without_multi_process_support_is_refused_before_loading(tmp_path, monkeypatch):
    from comlrl.pbrl import MADPOIterTrainer, MARLHFIterTrainer, MARLHFTrainer

    class OwnLoop(MADPOTrainer):
        multi_process_ready = False

    launcher = dict(WORLD_SIZE="2", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    for key, value in {**launcher, "MASTER_PORT": "29511"}.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ValueError, match="does not train under a multi-process launch"):
        OwnLoop(
            agent_model=str(tmp_path / "never-loaded"),
            reward_func=ratio_reward,
            args=MADPOConfig(output_dir=str(tmp_path)),
        )
    for cls in (MADPOTrainer, MARLHFTrainer, MADPOIterTrainer, MARLHFIterTrainer):
        assert cls.multi_process_ready, cls.__name__


def test_distributed_mode_single_ignores_the_launcher(tmp_path, monkeypatch):
    launcher = dict(WORLD_SIZE="2", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    for key, value in {**launcher, "MASTER_PORT": "29512"}.items():
        monkeypatch.setenv(key, value)
    trainer = _trainer(tmp_path, distributed_mode="single", num_train_epochs=1)
    assert trainer.dist.world_size == 1
    with pytest.raises(ValueError, match="distributed_mode must be one of"):
        MADPOConfig(distributed_mode="mpi")
