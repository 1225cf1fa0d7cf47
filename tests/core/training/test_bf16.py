"""``bf16=True``: bf16 compute with fp32 master weights and optimizer state. At a learning rate
of 1e-6 its weight change matches the fp32 run's within bf16 error, where training bf16 weights
directly loses most of the update."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest
import torch

from comlrl.core.distributed import local_context
from comlrl.core.distributed.gradients import GradientSync
from comlrl.core.logprobs import token_logprobs_parts
from comlrl.core.loop.run_state import RunState
from comlrl.core.testing import tiny_pair
from comlrl.core.training.optim import build_adamw
from comlrl.core.training.precision import master_weights
from comlrl.core.training.schedule import LRSchedules
from comlrl.core.training.train_step import Target, train_step
from tests.reinforce.helpers import make_trainer


class _Trainer(SimpleNamespace):
    # One process: the sync averages nothing and has no hooks.
    sync = GradientSync(local_context())


def _trainer(bf16: bool) -> _Trainer:
    args = SimpleNamespace(
        bf16=bf16, nonfinite_loss="raise", max_grad_norm=None, lr_scheduler_type="constant"
    )
    return _Trainer(args=args, run_state=RunState(), lr_schedules=LRSchedules(), monitors=None)


def _rows():
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(1, 300, (6,), generator=gen).tolist() for _ in range(4)]
    comps = [torch.randint(1, 300, (5,), generator=gen).tolist() for _ in range(4)]
    return prompts, comps


def _weight_change(model, bf16: bool, steps: int = 3) -> torch.Tensor:
    before = torch.cat([p.detach().float().flatten() for p in model.parameters()])
    opt = build_adamw(model.parameters(), lr=1e-6)
    prompts, comps = _rows()
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    for _ in range(steps):
        parts = token_logprobs_parts(model, prompts, comps, pad_id=0, max_tokens=None)
        train_step(
            _trainer(bf16),
            Target(model.parameters(), opt),
            parts,
            lambda part: -(adv[part[0]] * part[1].sequence_sum().float()).sum(),
            what="toy loss",
        )
    after = torch.cat([p.detach().float().flatten() for p in model.parameters()])
    return after - before


def test_bf16_keeps_the_fp32_update_where_bf16_weights_lose_it():
    fp32 = _weight_change(tiny_pair(seed=0)[0], bf16=False)
    mixed = _weight_change(tiny_pair(seed=0)[0], bf16=True)
    cos = torch.nn.functional.cosine_similarity(fp32, mixed, dim=0)
    assert cos > 0.98
    assert (mixed.norm() / fp32.norm() - 1).abs() < 0.05

    model = tiny_pair(seed=0)[0].to(torch.bfloat16)
    with pytest.warns(UserWarning, match="bf16=True"):
        pure = _weight_change(model, bf16=False)
    moved = (pure != 0).float().mean()
    assert moved < 0.5 * (fp32 != 0).float().mean()  # most of the small steps rounded away


def test_the_loss_forward_runs_in_bf16_and_the_weights_stay_fp32(tmp_path):
    trainer = make_trainer(tmp_path, bf16=True, num_train_epochs=1)
    seen = []
    head = trainer.agents[0].get_output_embeddings()
    hook = (
        trainer.agents[0]
        .model.layers[0]
        .mlp.register_forward_hook(
            lambda m, i, out: seen.append((torch.is_grad_enabled(), out.dtype))
        )
    )
    try:
        trainer.train()
    finally:
        hook.remove()
    assert (True, torch.bfloat16) in seen  # the gradient pass computes in bf16
    assert all(p.dtype == torch.float32 for m in trainer.agents for p in m.parameters())
    state = trainer.optimizers[0].state
    assert state and all(
        v.dtype == torch.float32
        for s in state.values()
        for v in s.values()
        if v.is_floating_point()
    )
    assert head.weight.dtype == torch.float32


def test_an_agent_loaded_in_bf16_gets_fp32_master_weights(tmp_path):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    agents = [m0.to(torch.bfloat16), m1.to(torch.bfloat16)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no low-precision optimizer warning: they are fp32 now
        trainer = make_trainer(tmp_path, agents=agents, tokenizer=tok, bf16=True)
    assert all(p.dtype == torch.float32 for m in trainer.agents for p in m.parameters())
    assert master_weights(torch.nn.Linear(2, 2)).weight.dtype == torch.float32
