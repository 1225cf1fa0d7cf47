"""Hub checkpoints are mostly stored in bf16; loaded by path with default settings, every
trainable model (agents, critics, reward models) trains fp32 weights and fp32 optimizer state,
and the KL reference is in the precision of the initial policy. Low-precision weights only when
``model_config.dtype`` asks for them, with one warning."""

from __future__ import annotations

import warnings

import pytest
import torch

from comlrl.ac import IACConfig, IACTrainer
from comlrl.core.models import load_causal_lm, model_load_kwargs
from comlrl.core.training.precision import LOW_PRECISION_MESSAGE
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer
from tests.reinforce.helpers import PROMPTS, length_reward

FAST = dict(
    num_train_epochs=1,
    num_turns=1,
    num_generations=2,
    max_new_tokens=4,
    rollout_buffer_size=2,
    eval_num_samples=0,
    eval_interval=0,
)


def _magrpo(path, tmp_path, model_config=None, **cfg):
    return MAGRPOTrainer(
        agent_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:2],
        reward_func=length_reward,
        model_config=model_config,
        args=MAGRPOConfig(output_dir=str(tmp_path / "run"), **{**FAST, **cfg}),
    )


def _float_dtypes(model) -> set:
    return {p.dtype for p in model.parameters() if p.is_floating_point()}


def test_the_fixture_is_stored_in_bf16_and_loads_fp32_by_default(hub_dir):
    assert _float_dtypes(load_causal_lm(hub_dir, {"dtype": "auto"})) == {torch.bfloat16}
    assert _float_dtypes(load_causal_lm(hub_dir)) == {torch.float32}
    assert model_load_kwargs(None)["dtype"] == torch.float32
    assert model_load_kwargs({"model_kwargs": {"torch_dtype": "float16"}}) == {
        "torch_dtype": "float16",
        "trust_remote_code": False,
    }


def test_a_bf16_checkpoint_trains_fp32_weights_and_a_small_step_moves_them(hub_dir, tmp_path):
    trainer = _magrpo(hub_dir, tmp_path, agent_learning_rate=1e-6)
    agent, opt = trainer.agents[0], trainer.optimizers[0]
    assert _float_dtypes(agent) == {torch.float32}
    before = [p.detach().clone() for p in agent.parameters()]
    for p in agent.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    moved = sum(int((p.detach() != b).sum()) for p, b in zip(agent.parameters(), before))
    total = sum(b.numel() for b in before)
    assert moved >= 0.99 * total
    states = [v for s in opt.state.values() for v in s.values() if v.is_floating_point()]
    assert states and all(v.dtype == torch.float32 for v in states if v.dim() > 0)


@pytest.mark.parametrize("bf16", [False, True])
def test_the_reference_is_in_the_initial_policy_precision(hub_dir, tmp_path, bf16):
    trainer = _magrpo(hub_dir, tmp_path, bf16=bf16, reference_kl_enabled=True)
    for agent, ref in zip(trainer.agents, trainer.reference_models):
        assert _float_dtypes(ref) == _float_dtypes(agent) == {torch.float32}


def _iac(path, tmp_path, model_config=None):
    return IACTrainer(
        agent_model=path,
        critic_model=path,
        num_agents=2,
        train_dataset=PROMPTS[:2],
        reward_func=length_reward,
        model_config=model_config,
        args=IACConfig(output_dir=str(tmp_path / "run"), **FAST),
    )


def test_critics_load_fp32_from_a_bf16_checkpoint(hub_dir, tmp_path):
    trainer = _iac(hub_dir, tmp_path)
    for critic in trainer.critics:
        assert _float_dtypes(critic) == {torch.float32}


def test_an_explicit_low_dtype_trains_bf16_with_one_warning(hub_dir, tmp_path):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        trainer = _iac(hub_dir, tmp_path, {"dtype": "bfloat16"})
    assert _float_dtypes(trainer.agents[0]) == {torch.bfloat16}
    assert _float_dtypes(trainer.critics[0].backbone) == {torch.bfloat16}
    mine = [w for w in seen if str(w.message) == LOW_PRECISION_MESSAGE]
    assert len(mine) == 1
    assert "1/256" in LOW_PRECISION_MESSAGE and "model_config.dtype" in LOW_PRECISION_MESSAGE
