"""The real-size options crossed with every family, one step each on a checkpoint saved like
the hub's (bf16 safetensors): {default, ``bf16=True``} x {full weights, adapters on one base,
parameter sharing} x {gradient checkpointing off, on}.

Each run checks what the options promise: the trainable weights and the optimizer state are
fp32; where a ratio to the rollout policy exists (MAGRPO, IAC, MAAC, MARLHF's RL phase) the
first pass's log ratio is 0 (|.| <= 1e-6); with the reference KL in the reward (MAGRPO, MARLHF)
the first rollout's KL is 0; MADPO's margins to its reference are 0 at the first step (loss
log 2); each agent's first gradient is the one a plain run computes (cosine >= 0.9999, below);
and an lr-1e-6 AdamW step moves at least 99% of the trainable entries (bf16 weights would
round most of it away). A combination that cannot be exact is refused at construction.

The plain run of a cell is the same family and precision with full weights, one model per
agent and no gradient checkpointing. None of the three options changes the math, so each
agent's first gradient must match the plain run's on the same samples:

- gradient checkpointing recomputes the same forward;
- parameter sharing steps one model with each agent's own gradient in turn (the second agent's
  at weights the first agent's lr-1e-6 step moved), except where the loss couples the agents
  (MADPO's joint margin): there the one model steps once, with the sum of every agent's
  gradient;
- a LoRA adapter starts with B = 0, so its gradient follows from the full weight's gradient G
  by the chain rule: dL/dB = s * G @ A^T and dL/dA = 0 (s = lora_alpha / r).

``bf16=True`` cells compare with the plain run under ``bf16=True``: autocast rounds both sides
alike, whereas against an fp32 run the gradients agree only to bf16 precision, which
``tests/core/training/test_bf16.py`` measures at the level of the weight change."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

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
# Families whose loss couples the agents: with parameter sharing the one model steps once.
JOINT = ("madpo", "madpo_iter")


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
        # Mixed-adapter calls draw the samples in another order than agent-by-agent decoding,
        # and the gradient check needs the plain run's samples.
        cfg["rollout_backend_options"] = {"mixed_adapters": False}
    return cfg, model_config


def _magrpo(path, tmp, cfg, model_config, reward):
    return MAGRPOTrainer(
        agent_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:1],
        reward_func=reward,
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


def _iac(path, tmp, cfg, model_config, reward):
    return IACTrainer(
        agent_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:1],
        reward_func=reward,
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


def _maac(path, tmp, cfg, model_config, reward):
    return MAACTrainer(
        agent_model=path,
        critic_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:1],
        reward_func=reward,
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


def _madpo(path, tmp, cfg, model_config, reward, cls=MADPOTrainer, config=MADPOConfig):
    return cls(
        agent_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:1],
        reward_func=reward,
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


def _madpo_iter(path, tmp, cfg, model_config, reward):
    return _madpo(path, tmp, cfg, model_config, reward, MADPOIterTrainer, MADPOIterConfig)


def _marlhf(path, tmp, cfg, model_config, reward):
    return MARLHFTrainer(
        agent_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:1],
        reward_func=reward,
        model_config=model_config,
        args=MARLHFConfig(
            output_dir=str(tmp),
            num_generations=2,
            rollout_buffer_size=1,
            rollout_batch_size=1,
            preference_num_candidates=3,
            preference_pairs_per_sample=2,
            reward_learning_rate=1e-6,
            policy_loss="test_first_pass_ppo",
            reference_kl_enabled=True,
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


@dataclass
class Run:
    """One trained cell: its trainer; the reward calls (the samples) before the first agent
    step; each agent optimizer's first step as ``{name: (weight, gradient)}``; the first
    pass's largest |log ratio| per pass, every first-rollout reference KL and each DPO
    update's metrics."""

    trainer: Any = None
    samples: list = field(default_factory=list)
    first_steps: dict[int, dict[str, tuple[torch.Tensor, torch.Tensor]]] = field(
        default_factory=dict
    )
    first_pass: list[float] = field(default_factory=list)
    kls: list[float] = field(default_factory=list)
    dpo: list[dict] = field(default_factory=list)
    training: bool = True


def _policy_trainer(trainer):
    """The trainer whose agents and optimizers take the policy steps (MARLHF's RL phase)."""
    return getattr(trainer, "rl_trainer", None) or trainer


def _name(name: str) -> str:
    """A parameter's name as the plain model spells it (no PEFT wrapper prefix)."""
    return re.sub(r"^(base_model\.model\.)+", "", name)


def _record_first_steps(run: Run) -> None:
    """Record, at each agent optimizer's first step, the weights and gradients it steps with
    (a step pre-hook: after clipping, which scales and leaves the direction alone)."""
    policy = _policy_trainer(run.trainer)
    heads = getattr(policy, "value_heads", None)  # IAC's heads step with their actor
    for agent, opt in enumerate(policy.optimizers):
        names = {}
        modules = {"": policy.agents[agent], "value_head.": heads[agent] if heads else None}
        for prefix, module in modules.items():
            for name, p in module.named_parameters() if module is not None else []:
                names.setdefault(id(p), prefix + _name(name))

        def hook(opt, args, kwargs, agent=agent, names=names):
            if not run.training or agent in run.first_steps:
                return
            run.first_steps[agent] = {
                names[id(p)]: (
                    p.detach().clone(),
                    torch.zeros_like(p) if p.grad is None else p.grad.detach().clone(),
                )
                for g in opt.param_groups
                for p in g["params"]
            }

        opt.register_step_pre_hook(hook)


def _train(path, tmp, family, bf16, weights, ckpt) -> Run:
    """Build the cell's trainer, train it one step with the recorders in place."""
    cfg, model_config = _options(bf16, weights, ckpt)
    run = Run()

    def reward(*completions):
        if not run.first_steps:  # the samples the first update learns from
            run.samples.append([list(c) for c in completions])
        return length_reward(*completions)

    trainer = run.trainer = FAMILIES[family](path, tmp, cfg, model_config, reward)
    trainer.verbose = False
    _record_first_steps(run)
    if hasattr(trainer, "dpo_update"):
        update = trainer.dpo_update

        def recorded_update(pairs):
            run.dpo.append(update(pairs))
            return run.dpo[-1]

        trainer.dpo_update = recorded_update
    completion_kls = shaping.completion_kls

    def recorded_kls(*args, **kwargs):
        out = completion_kls(*args, **kwargs)
        run.kls.extend(abs(v) for agent in out for node in agent for v in node)
        return out

    FIRST_PASS.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shaping, "completion_kls", recorded_kls)
        trainer.train()
    run.training = False
    run.first_pass = list(FIRST_PASS)
    return run


RUNS: dict[tuple, Run] = {}


def _run(path, tmp, *cell) -> Run:
    """The cell's run; the plain cells' (full weights, checkpointing off) are kept, as every
    other cell of their family and precision compares with them."""
    family, bf16, weights, ckpt = cell
    if (weights, ckpt) != ("full", False):
        return _train(path, tmp, *cell)
    if cell not in RUNS:
        RUNS[cell] = _train(path, tmp, *cell)
    return RUNS[cell]


def _expected(plain_grads: dict[str, torch.Tensor], name: str, weights: dict) -> torch.Tensor:
    """The gradient the option's parameter ``name`` must have, from the plain run's gradients
    of the same agent: the same parameter's, or for a LoRA factor the chain rule's (B = 0)."""
    lora = re.fullmatch(r"(.*)\.lora_([AB])\.([^.]+)\.weight", name)
    if lora is None:
        return plain_grads[name]
    module, factor, adapter = lora.groups()
    if factor == "A":
        return torch.zeros_like(weights[name])
    scale = LORA["lora_alpha"] / LORA["r"]
    a = weights[f"{module}.lora_A.{adapter}.weight"]
    return scale * plain_grads[f"{module}.weight"] @ a.T


def _gradient_cosines(run: Run, plain: Run, family: str, weights: str) -> list[float]:
    """Each stepping optimizer's first gradient against the plain run's (see the module
    docstring), as cosines in float64."""
    plain_grads = {a: {n: g for n, (_, g) in s.items()} for a, s in plain.first_steps.items()}
    agents = sorted(plain_grads)
    if weights == "shared" and family in JOINT:
        total = {n: sum(plain_grads[a][n] for a in agents) for n in plain_grads[0]}
        plain_grads = {a: total for a in agents}
    cosines = []
    for agent, step in sorted(run.first_steps.items()):
        values = {n: w for n, (w, _) in step.items()}
        got = torch.cat([g.flatten().double() for _, g in step.values()])
        want = torch.cat(
            [_expected(plain_grads[agent], n, values).flatten().double() for n in step]
        )
        cosines.append(float(torch.nn.functional.cosine_similarity(got, want, dim=0)))
    return cosines


@pytest.fixture(scope="module")
def checkpoint() -> str:
    return hub_model_dir(arch="qwen2")


@pytest.mark.parametrize("ckpt", [False, True], ids=["recompute_off", "recompute_on"])
@pytest.mark.parametrize("weights", ["full", "adapters", "shared"])
@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_one_step_of_every_combination_is_exact(checkpoint, tmp_path, family, bf16, weights, ckpt):
    plain = _run(checkpoint, tmp_path / "plain", family, bf16, "full", False)
    run = _run(checkpoint, tmp_path / "run", family, bf16, weights, ckpt)

    optimizers = _optimizers(run.trainer)
    assert all(p.dtype == torch.float32 for p in _trainable(optimizers))
    states = [v for o in optimizers for s in o.state.values() for v in s.values()]
    assert states and all(v.dtype == torch.float32 for v in states if v.dim() > 0)
    if family in ("magrpo", "iac", "maac", "marlhf"):
        assert run.first_pass and run.first_pass[0] <= 1e-6
    if family in ("magrpo", "marlhf"):
        assert run.kls and max(run.kls) <= 1e-6
    if family in JOINT:
        assert run.dpo and abs(run.dpo[0]["dpo/margin"]) <= 1e-6
        assert run.dpo[0]["dpo/loss"] == pytest.approx(math.log(2), abs=1e-6)

    # Like with like: the plain run sampled the same completions before its first update.
    assert run.samples and run.samples == plain.samples
    stepping = [0] if weights == "shared" and family in JOINT else [0, 1]
    assert sorted(run.first_steps) == stepping
    cosines = _gradient_cosines(run, plain, family, weights)
    assert min(cosines) >= 0.9999, cosines

    # (The plain run's weights may move: the cells after it read only what it recorded.)
    assert _moved_share(optimizers) >= 0.99


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_combination_that_cannot_be_exact_is_refused_at_construction(
    checkpoint, tmp_path, family
):
    cfg = {"peft_config": {**LORA, "init_lora_weights": "pissa"}}
    with pytest.raises(ValueError, match=r"peft_config\.init_lora_weights") as refused:
        FAMILIES[family](checkpoint, tmp_path / "run", cfg, None, length_reward)
    assert "\n" not in str(refused.value)
