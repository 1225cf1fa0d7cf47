"""Scripts and configs written for CoMLRL 1.4.3 keep working, through the public API."""

import sys
import warnings

import pytest
import torch

from comlrl.core.compat import notices as compat_notices
from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.rollout import rollouts
from comlrl.core.testing import tiny_pair
from comlrl.trainers.actor_critic import IACConfig, IACTrainer
from comlrl.trainers.preference import (
    JointRewardModel,
    MADPOConfig,
    MADPOTrainer,
    MARLHFConfig,
    MARLHFTrainer,
)
from comlrl.trainers.reinforce import (
    CentralizedMAGRPOConfig,
    CentralizedMAGRPOTrainer,
    MAGRPOConfig,
    MAGRPOTrainer,
)
from comlrl.utils import resolve_reward_range, set_reward_range

ITEMS = [{"prompt": "Write a story about a cat."}, {"prompt": "Write a story about the sea."}]
FAST = dict(
    num_train_epochs=1,
    num_generations=2,
    max_new_tokens=4,
    temperature=1.0,
    top_p=1.0,
    top_k=None,
    logging_steps=1,
    eval_interval=0,
    seed=0,
)


def reward(a, b):
    return [float(len(y) - len(x)) / 10.0 for x, y in zip(a, b)]


def again(*, prompt, agent_completions, num_agents, **_):
    return [f"{prompt} Again." for _ in range(num_agents)]


# ------------------------------------------------------------------ reward ranges
def test_set_reward_range_returns_the_function_with_float_bounds():
    def score(a, b):
        return [1.0] * len(a)

    assert set_reward_range(score, 0, 2) is score
    assert score.reward_range == (0.0, 2.0)
    assert all(type(v) is float for v in score.reward_range)
    assert resolve_reward_range(score) == (0.0, 2.0)
    assert resolve_reward_range(lambda a, b: a) is None
    with pytest.raises(ValueError, match="low < high"):
        set_reward_range(score, 3, 1)


# ------------------------------------------------------------------ IAC devices
def test_iac_value_heads_accept_critic_devices_naming_the_agents_devices(tmp_path):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    args = IACConfig(
        **FAST,
        num_turns=1,
        use_separate_critic=False,
        critic_devices="cpu",
        output_dir=str(tmp_path),
    )
    trainer = IACTrainer(
        agents=[m0, m1], tokenizer=tok, train_dataset=ITEMS, reward_func=reward, args=args
    )
    assert [str(next(h.parameters()).device) for h in trainer.value_heads] == ["cpu", "cpu"]
    trainer.train()
    assert trainer.env_step > 0


def test_iac_value_heads_refuse_a_conflicting_critic_device(tmp_path):
    m0, tok = tiny_pair(seed=0)
    args = IACConfig(
        **FAST,
        num_turns=1,
        use_separate_critic=False,
        critic_devices="meta",
        output_dir=str(tmp_path),
    )
    with pytest.raises(ValueError, match="critic_devices 'meta'.*value head lives on its actor"):
        IACTrainer(
            agents=[m0, m0], tokenizer=tok, train_dataset=ITEMS, reward_func=reward, args=args
        )


# ------------------------------------------------------------------ discount
def test_a_multi_turn_discount_warns_once_that_it_now_applies(monkeypatch):
    monkeypatch.setattr(compat_notices, "_issued", set())
    with pytest.warns(UserWarning, match=r"discount=0\.9 now takes effect.*1\.4\.3"):
        MAGRPOConfig(num_turns=2, discount=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MAGRPOConfig(num_turns=2, discount=0.9)  # once per process
        MAGRPOConfig(num_turns=1, discount=1.0)


def test_discount_still_shapes_magrpo_returns(tmp_path, monkeypatch):
    monkeypatch.setattr(compat_notices, "_issued", set())
    m, tok = tiny_pair(seed=0)
    returns = {}
    for gamma in (1.0, 0.5):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            args = MAGRPOConfig(**FAST, num_turns=2, discount=gamma, output_dir=str(tmp_path))
        trainer = MAGRPOTrainer(
            agents=[m, m],
            tokenizer=tok,
            train_dataset=ITEMS[:1],
            reward_func=lambda a, b: [1.0] * len(a),
            external_transition=again,
            args=args,
        )
        (tree,) = rollouts.trees(trainer, ITEMS[:1], 2, rollouts.sampling_params(trainer))
        returns[gamma] = tree.returns[0]
    assert returns[1.0] == pytest.approx(2.0)  # r=1 at both turns
    assert returns[0.5] == pytest.approx(1.5)


def test_actor_critic_logs_expected_return_undiscounted(tmp_path):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    args = IACConfig(
        **{**FAST, "num_generations": 1},
        num_turns=2,
        discount=0.5,
        use_separate_critic=False,
        rollout_buffer_size=2,
        output_dir=str(tmp_path),
    )
    trainer = IACTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=ITEMS[:1],
        reward_func=lambda a, b: [1.0] * len(a),
        external_transition=again,
        args=args,
    )
    trainer.train()
    records = [
        r
        for r in read_metrics(trainer.reporting.run_dir + "/metrics.jsonl")
        if "turn_1/reward_mean" in r
    ]
    assert records
    # A reward of 1 at both turns: 2.0 undiscounted (0.5 would have given 1.5).
    assert all(r["turn_1/expected_return"] == pytest.approx(2.0) for r in records)
    assert all(r["turn_2/expected_return"] == pytest.approx(1.0) for r in records)


# ------------------------------------------------------------------ centralized prompt
def test_tagged_centralized_prompt_holds_every_roles_formatted_prompt(tmp_path):
    m, tok = tiny_pair(seed=0)
    formatters = [lambda x: "OUTLINE: " + x["prompt"], lambda x: "DRAFT: " + x["prompt"]]
    common = dict(
        agents=[m],
        tokenizer=tok,
        train_dataset=ITEMS,
        reward_func=reward,
        formatters=formatters,
    )
    magrpo = CentralizedMAGRPOTrainer(
        **common, args=CentralizedMAGRPOConfig(**FAST, num_agents=2, num_turns=1)
    )
    madpo = MADPOTrainer(
        **common,
        args=MADPOConfig(
            **{k: v for k, v in FAST.items() if k != "num_generations"},
            collaboration_mode="centralized",
            num_agents=2,
            output_dir=str(tmp_path),
        ),
    )
    for trainer in (magrpo, madpo):
        joint = trainer.formatters[0](ITEMS[0])
        assert "OUTLINE: Write a story about a cat." in joint
        assert "DRAFT: Write a story about a cat." in joint
        assert "<agent_0>" in joint and "<agent_1>" in joint


# ------------------------------------------------------------------ reward model
def test_joint_reward_model_scores_from_a_causal_lm_backbone():
    lm, tok = tiny_pair(arch="gpt2", seed=0)
    rm = JointRewardModel(lm)
    assert rm.backbone is lm
    body = JointRewardModel(lm.base_model)
    body.score_head.load_state_dict(rm.score_head.state_dict())
    batch = tok(["a joint answer", "another one, longer"], padding=True, return_tensors="pt")
    scores = rm(batch["input_ids"], batch["attention_mask"])
    assert scores.shape == (2,) and torch.isfinite(scores).all()
    torch.testing.assert_close(scores, body(batch["input_ids"], batch["attention_mask"]))


# ------------------------------------------------------------------ MARLHF sources
def test_marlhf_without_agents_names_both_arguments():
    with pytest.raises(ValueError, match="Either agent_model or agents must be provided"):
        MARLHFTrainer(reward_func=reward, train_dataset=ITEMS, args=MARLHFConfig())


# ------------------------------------------------------------------ W&B at build time
def test_missing_wandb_is_reported_when_the_trainer_is_built(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if wandb were not installed
    m, tok = tiny_pair(seed=0)
    with pytest.raises(ImportError, match=r"report_to: \[wandb\] needs the wandb package"):
        MAGRPOTrainer(
            agents=[m, m],
            tokenizer=tok,
            train_dataset=ITEMS,
            reward_func=reward,
            wandb_config={"project": "p", "mode": "offline"},
            args=MAGRPOConfig(**FAST, num_turns=1, output_dir=str(tmp_path), report_to=["wandb"]),
        )
