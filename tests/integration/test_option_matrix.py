"""The real-size options crossed with every family, one step each on a checkpoint saved like
the hub's (bf16 safetensors): {default, ``bf16=True``} x {full weights, adapters on one base,
parameter sharing} x {gradient checkpointing off, on}.

Each run checks what the options promise: the trainable weights and the optimizer state are
fp32; where a ratio to the rollout policy exists the first pass's log ratio is 0 (|.| <= 1e-6);
with the reference KL in the reward the first rollout's KL is 0; MADPO's margins to its
reference are 0 at the first step (loss log 2); and an lr-1e-6 AdamW step moves at least 99%
of the trainable entries (bf16 weights would round most of it away)."""

from __future__ import annotations

import math

import pytest
import torch

from comlrl.ac import IACConfig, IACTrainer, MAACConfig, MAACTrainer
from comlrl.core import algos
from comlrl.core.rewards import shaping
from comlrl.core.testing import hub_model_dir
from comlrl.pbrl import MADPOConfig, MADPOIterTrainer, MADPOTrainer, MARLHFConfig, MARLHFTrainer
from comlrl.pbrl.iter_config import MADPOIterConfig
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer
from tests.ac.helpers import transition
from tests.reinforce.helpers import PROMPTS, length_reward

LORA = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.05, "target_modules": ["q_proj", "v_proj"]}
COMMON = dict(
    num_train_epochs=1,
    max_new_tokens=3,
    agent_learning_rate=1e-6,
    eval_num_samples=0,
    eval_interval=0,
    logging_steps=1,
    seed=0,
)
FIRST_PASS: list[float] = []


@algos.register_policy_loss("test_first_pass_ppo", needs_old_logps=True)
def _first_pass_ppo(logps, old, adv, weights, config):
    """PPO's loss, recording the largest |log ratio| of each pass it sees."""
    gap = ((logps.values.detach() - old) * logps.mask).abs().max()
    FIRST_PASS.append(float(gap))
    return algos.get("policy_loss", "ppo", "policy_loss")(logps, old, adv, weights, config)


def _options(bf16, weights, ckpt):
    model_config = {"share_parameters": True} if weights == "shared" else None
    cfg = dict(bf16=bf16, gradient_checkpointing=ckpt)
    if weights == "adapters":
        cfg["peft_config"] = LORA
    return cfg, model_config


def _magrpo(path, tmp, cfg, model_config):
    return MAGRPOTrainer(
        agent_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:1],
        reward_func=length_reward,
        model_config=model_config,
        args=MAGRPOConfig(
            output_dir=str(tmp),
            num_turns=1,
            num_generations=2,
            rollout_buffer_size=1,
            policy_loss="test_first_pass_ppo",
            reference_kl_enabled=True,
            **COMMON,
            **cfg,
        ),
    )


def _iac(path, tmp, cfg, model_config):
    return IACTrainer(
        agent_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:1],
        reward_func=length_reward,
        model_config=model_config,
        args=IACConfig(
            output_dir=str(tmp),
            num_turns=1,
            num_generations=2,
            rollout_buffer_size=2,
            use_separate_critic=False,
            policy_loss="test_first_pass_ppo",
            **COMMON,
            **cfg,
        ),
    )


def _maac(path, tmp, cfg, model_config):
    return MAACTrainer(
        agent_model=path,
        critic_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:1],
        reward_func=length_reward,
        external_transition=transition,
        model_config=model_config,
        args=MAACConfig(
            output_dir=str(tmp),
            num_turns=1,
            num_generations=2,
            rollout_buffer_size=2,
            policy_loss="test_first_pass_ppo",
            **COMMON,
            **cfg,
        ),
    )


def _madpo(path, tmp, cfg, model_config, cls=MADPOTrainer, config=MADPOConfig):
    return cls(
        agent_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:1],
        reward_func=length_reward,
        model_config=model_config,
        args=config(
            output_dir=str(tmp),
            reference_free=False,
            preference_num_candidates=3,
            preference_pairs_per_sample=2,
            train_batch_size=2,
            **COMMON,
            **cfg,
        ),
    )


def _madpo_iter(path, tmp, cfg, model_config):
    return _madpo(path, tmp, cfg, model_config, MADPOIterTrainer, MADPOIterConfig)


def _marlhf(path, tmp, cfg, model_config):
    return MARLHFTrainer(
        agent_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:1],
        reward_func=length_reward,
        model_config=model_config,
        args=MARLHFConfig(
            output_dir=str(tmp),
            num_generations=2,
            rollout_buffer_size=1,
            rollout_batch_size=1,
            preference_num_candidates=3,
            preference_pairs_per_sample=2,
            reward_learning_rate=1e-6,
            **COMMON,
            **cfg,
        ),
    )


FAMILIES = {
    "magrpo": _magrpo,
    "iac": _iac,
    "maac": _maac,
    "madpo": _madpo,
    "madpo_iter": _madpo_iter,
    "marlhf": _marlhf,
}


def _optimizers(trainer) -> list:
    found = []
    for name in ("optimizers", "agent_optimizers", "critic_optimizers"):
        found += list(getattr(trainer, name, None) or [])
    if getattr(trainer, "reward_optimizer", None) is not None:
        found.append(trainer.reward_optimizer)
    return list({id(o): o for o in found}.values())


def _trainable(optimizers) -> list[torch.Tensor]:
    params = [p for o in optimizers for g in o.param_groups for p in g["params"]]
    return list({id(p): p for p in params}.values())


def _moved_share(optimizers) -> float:
    """The share of trainable entries one lr-1e-6 AdamW step (unit gradients) changes."""
    params = _trainable(optimizers)
    before = [p.detach().clone() for p in params]
    for o in optimizers:
        o.zero_grad(set_to_none=True)
        for g in o.param_groups:
            g["lr"] = 1e-6
    for p in params:
        p.grad = torch.ones_like(p)
    for o in optimizers:
        o.step()
    moved = sum(int((p.detach() != b).sum()) for p, b in zip(params, before))
    return moved / sum(b.numel() for b in before)


@pytest.fixture(scope="module")
def checkpoint() -> str:
    return hub_model_dir(arch="qwen2")


@pytest.mark.parametrize("ckpt", [False, True], ids=["recompute_off", "recompute_on"])
@pytest.mark.parametrize("weights", ["full", "adapters", "shared"])
@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_one_step_of_every_combination_is_exact(
    checkpoint, tmp_path, monkeypatch, family, bf16, weights, ckpt
):
    cfg, model_config = _options(bf16, weights, ckpt)
    trainer = FAMILIES[family](checkpoint, tmp_path / "run", cfg, model_config)
    trainer.verbose = False
    kls: list[float] = []
    completion_kls = shaping.completion_kls

    def recorded(*args, **kwargs):
        out = completion_kls(*args, **kwargs)
        kls.extend(abs(v) for agent in out for node in agent for v in node)
        return out

    monkeypatch.setattr(shaping, "completion_kls", recorded)
    dpo = []
    if hasattr(trainer, "dpo_update"):
        update = trainer.dpo_update

        def first(pairs):
            dpo.append(update(pairs))
            return dpo[-1]

        trainer.dpo_update = first
    FIRST_PASS.clear()
    trainer.train()

    optimizers = _optimizers(trainer)
    assert all(p.dtype == torch.float32 for p in _trainable(optimizers))
    states = [v for o in optimizers for s in o.state.values() for v in s.values()]
    assert states and all(v.dtype == torch.float32 for v in states if v.dim() > 0)
    if family in ("magrpo", "iac", "maac"):
        assert FIRST_PASS and FIRST_PASS[0] <= 1e-6
    if family == "magrpo":
        assert kls and max(kls) <= 1e-6
    if family in ("madpo", "madpo_iter"):
        assert dpo and abs(dpo[0]["dpo/margin"]) <= 1e-6
        assert dpo[0]["dpo/loss"] == pytest.approx(math.log(2), abs=1e-6)
    assert _moved_share(optimizers) >= 0.99
