"""The one step driver: gradients of every part add up before one optimizer step, parts are
drawn lazily, and a non-finite part follows ``nonfinite_loss``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from comlrl.core.distributed import local_context
from comlrl.core.distributed.gradients import GradientSync
from comlrl.core.loop.run_state import RunState
from comlrl.core.training.schedule import LRSchedules
from comlrl.core.training.train_step import Target, accumulate_gradients, train_step


class _Trainer(SimpleNamespace):
    # One process: the sync averages nothing and has no hooks.
    sync = GradientSync(local_context())
    monitors = None  # no reward-hacking monitors watch these steps


def _trainer(policy="raise", max_grad_norm=None):
    args = SimpleNamespace(
        nonfinite_loss=policy,
        max_grad_norm=max_grad_norm,
        lr_scheduler_type="constant",
        bf16=False,
    )
    return _Trainer(args=args, run_state=RunState(), lr_schedules=LRSchedules())


def test_parts_accumulate_into_one_step_like_the_whole_batch():
    data = torch.arange(6.0)
    whole = torch.nn.Parameter(torch.tensor(1.0))
    opt = torch.optim.SGD([whole], lr=0.1)
    train_step(_trainer(), Target([whole], opt), [data], lambda x: (whole * x).sum(), what="w")

    split = torch.nn.Parameter(torch.tensor(1.0))
    opt = torch.optim.SGD([split], lr=0.1)
    drawn = []

    def parts():
        for chunk in (data[:2], data[2:]):
            # the previous part's backward already ran: its gradient is in place
            drawn.append(None if split.grad is None else float(split.grad))
            yield chunk

    step = train_step(
        _trainer(),
        Target([split], opt),
        parts(),
        lambda x: ((split * x).sum(), {"n": len(x)}),
        what="w",
    )
    assert drawn == [None, 1.0]
    assert float(split) == pytest.approx(float(whole))
    assert step.loss == pytest.approx(15.0) and step.total("n") == 6 and step.means() == {"n": 3}
    assert step.grad_norm == pytest.approx(15.0)


def test_a_non_finite_part_skips_or_raises():
    w = torch.nn.Parameter(torch.tensor(1.0))
    opt = torch.optim.SGD([w], lr=0.1)
    bad = [torch.tensor(1.0), torch.tensor(float("nan"))]
    trainer = _trainer("skip")
    with pytest.warns(UserWarning, match="non-finite toy loss"):
        assert train_step(trainer, Target([w], opt), bad, lambda x: w * x, what="toy loss") is None
    assert trainer.run_state.skipped_nonfinite == 1 and w.grad is None and float(w) == 1.0
    with pytest.raises(FloatingPointError, match="toy loss"):
        train_step(_trainer(), Target([w], opt), bad, lambda x: w * x, what="toy loss")


def test_every_target_steps_and_agent_steps_are_counted():
    a, b = torch.nn.Parameter(torch.tensor(1.0)), torch.nn.Parameter(torch.tensor(2.0))
    opts = [torch.optim.SGD([a], lr=1.0), torch.optim.SGD([b], lr=1.0)]
    trainer = _trainer(max_grad_norm=0.5)
    trainer.rollout_backend = SimpleNamespace(on_weights_updated=lambda *args: None)
    trainer.agents = [None, None]
    step = train_step(
        trainer,
        [Target([a], opts[0], 0), Target([b], opts[1], 1)],
        [None],
        lambda _: a + b,
        what="joint",
    )
    assert step.grad_norms == [1.0, 1.0]
    assert float(a) == pytest.approx(0.5) and float(b) == pytest.approx(1.5)  # clipped to 0.5
    assert trainer.run_state.agent_steps == {0: 1, 1: 1}


def test_accumulating_adds_to_what_the_parameters_hold():
    w = torch.nn.Parameter(torch.tensor(1.0))
    w.grad = torch.tensor(2.0)
    out = accumulate_gradients(
        _trainer(), [3.0], lambda x: w * x, what="w", optimizers=[torch.optim.SGD([w], lr=1.0)]
    )
    assert out == (3.0, {}) and float(w.grad) == 5.0


def test_a_step_frees_its_gradients_once_the_optimizer_has_stepped():
    # Spent gradients are not kept until the target's next step: they would be alive while the
    # other agents run their passes.
    w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    opt = torch.optim.SGD([w], lr=0.5)
    done = train_step(
        _trainer(), Target([w], opt), [torch.ones(2)], lambda x: (w * x).sum(), what="w"
    )
    assert done is not None and done.grad_norm == pytest.approx(2**0.5)
    assert w.grad is None
    assert w.tolist() == [0.5, 1.5]  # the step used the gradient before it was freed
