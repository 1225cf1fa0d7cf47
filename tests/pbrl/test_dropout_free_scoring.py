"""F7: MADPO's update and the reward model's fit score without dropout (TRL's DPO and reward
configs default to ``disable_dropout``). At the first step the policy is its reference, so
every margin is 0 and the loss is log 2; with dropout the margins were noise (loss 0.711)."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import torch

from comlrl.core.distributed import local_context
from comlrl.core.distributed.gradients import GradientSync
from comlrl.core.testing import build_model, build_tokenizer
from comlrl.pbrl import JointRewardModel, MADPOConfig, MADPOTrainer
from comlrl.pbrl.reward_model import train_reward_model

from .helpers import FAST, PROMPTS, ratio_reward


def _gpt2_agents():
    tok = build_tokenizer()
    # GPT-2's config keeps dropout 0.1 in the embeddings, attention and MLP.
    return [build_model(tok, arch="gpt2", seed=s) for s in (0, 1)], tok


def test_madpo_first_step_margins_are_zero_with_a_dropout_model(tmp_path):
    agents, tok = _gpt2_agents()
    assert any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in agents[0].modules())
    torch.manual_seed(0)
    trainer = MADPOTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=ratio_reward,
        args=MADPOConfig(
            **{**FAST, "num_train_epochs": 1},
            reference_free=False,
            preference_num_candidates=3,
            preference_pairs_per_sample=2,
            train_batch_size=4,
            output_dir=str(tmp_path / "run"),
        ),
    )
    trainer.verbose = False
    seen = []
    update = trainer.dpo_update
    trainer.dpo_update = lambda pairs: seen.append(update(pairs)) or seen[-1]
    trainer.train()
    assert seen and seen[0] is not None
    assert abs(seen[0]["dpo/margin"]) <= 1e-6
    assert abs(seen[0]["dpo/loss"] - math.log(2)) <= 1e-6


def test_the_reward_model_fits_without_dropout():
    agents, tok = _gpt2_agents()
    model = JointRewardModel.from_source(agents[0], seed=0)
    rates = []
    hooks = [
        m.register_forward_pre_hook(lambda mod, _: rates.append(mod.p))
        for m in model.modules()
        if isinstance(m, torch.nn.Dropout)
    ]
    trainer = SimpleNamespace(
        dist=local_context(),
        sync=GradientSync(local_context()),
        agent_steps={},
        args=SimpleNamespace(bf16=False, nonfinite_loss="raise", max_grad_norm=None),
        skipped_nonfinite=0,
        monitors=None,
    )
    train_reward_model(
        model,
        tok,
        torch.optim.AdamW(model.parameters(), lr=1e-3),
        ["a long story about the sea"],
        ["a cat"],
        trainer=trainer,
        epochs=1,
        batch_size=1,
        max_length=None,
        rng=random.Random(0),
    )
    for h in hooks:
        h.remove()
    assert rates and all(p == 0.0 for p in rates)
    assert any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules())
