"""The one optimizer-step skeleton every family's update runs: clear the gradients, then for
each part of the mini-batch take its loss, apply the non-finite policy and run its backward
pass, and finally take the optimizer step (:func:`comlrl.core.optim.apply_step`) of every
target. A family supplies only the parts (micro-batches) and how a part becomes a loss.

A part's loss is what its backward pass differentiates, already scaled to its share of the
mini-batch; the step's reported loss is the sum of those values. Whatever else the family wants
to log comes back per part in :attr:`StepResult.metrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from comlrl.core.logprobs import measuring_entropy
from comlrl.core.optim import apply_step, loss_is_usable
from comlrl.core.precision import compute_context

_END = object()


def _device_of(optimizers: Sequence[Any]) -> torch.device | None:
    for opt in optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                return p.device
    return None


@dataclass
class Target:
    """What one optimizer step updates: ``parameters`` through ``optimizer``; ``agent`` is the
    agent's index when the step changes a policy (None for critics and reward models);
    ``scheduled=False`` keeps the optimizer off ``lr_scheduler_type``'s schedule. ``turn``
    (0-based) says that the step trains the policy on sampled completions of that turn: the
    reward-hacking monitors then measure its token entropy and read its ``clip_fraction`` and
    ``kl`` (:mod:`comlrl.core.monitors`); None for every other step."""

    parameters: Any
    optimizer: Any
    agent: int | None = None
    scheduled: bool = True
    turn: int | None = None


@dataclass
class StepResult:
    """One step's outcome: the summed part losses, each target's gradient norm before
    clipping, and every value a part reported, in part order."""

    loss: float
    grad_norms: list[float]
    metrics: dict[str, list[float]] = field(default_factory=dict)

    @property
    def grad_norm(self) -> float:
        """The first target's gradient norm (most steps have one target)."""
        return self.grad_norms[0]

    def means(self) -> dict[str, float]:
        """Each reported value averaged over the parts that reported it."""
        return {key: float(np.mean(values)) for key, values in self.metrics.items()}

    def total(self, key: str) -> float:
        """A reported value summed over the parts."""
        return float(sum(self.metrics.get(key, [])))


PartLoss = Callable[[Any], "tuple[torch.Tensor, dict[str, float]] | torch.Tensor"]


def accumulate_gradients(
    trainer: Any, parts: Iterable[Any], loss_of: PartLoss, *, what: str, optimizers: Sequence[Any]
) -> tuple[float, dict[str, list[float]]] | None:
    """The backward half of a step: per part ``loss_of(part)`` (a loss, or a loss and its
    metrics), the finite check of ``nonfinite_loss``, ``backward``. Gradients add to what the
    parameters hold. Returns the summed loss and the reported values, or None when a
    non-finite loss was skipped (the gradients of ``optimizers`` are then cleared); under
    ``nonfinite_loss='raise'`` a non-finite loss raises ``FloatingPointError``. ``parts`` may be
    lazy: each is drawn after the previous part's backward, so one part's graph is alive. With
    ``bf16=True`` each part's forward and loss run under bf16 autocast
    (:mod:`comlrl.core.precision`), its backward outside."""
    total = 0.0
    reported: dict[str, list[float]] = {}
    device = _device_of(optimizers)
    parts = iter(parts)
    while True:
        # The forward (drawn with the part) and the loss run under bf16 autocast with
        # ``bf16=True``; the backward runs outside it, as autocast asks.
        with compute_context(trainer.args, device):
            part = next(parts, _END)
            if part is _END:
                break
            out = loss_of(part)
        loss, metrics = out if isinstance(out, tuple) else (out, {})
        if not loss_is_usable(trainer, loss, what, optimizers):
            return None
        loss.backward()
        total += loss.item()
        for key, value in metrics.items():
            reported.setdefault(key, []).append(value)
    return total, reported


def train_step(
    trainer: Any,
    targets: Target | Sequence[Target],
    parts: Iterable[Any],
    loss_of: PartLoss,
    *,
    what: str,
) -> StepResult | None:
    """One optimizer step over ``parts``: ``zero_grad`` of every target, the parts' backward
    passes (:func:`accumulate_gradients`), then :func:`~comlrl.core.optim.apply_step` of every
    target in order. ``what`` names the loss in the non-finite messages; None means a
    non-finite loss was skipped and nothing stepped. A step the trainer's monitors watch (see
    :class:`Target`) measures token entropy in its forwards and reports to them once it
    succeeded."""
    targets = [targets] if isinstance(targets, Target) else list(targets)
    for t in targets:
        t.parameters = list(t.parameters)  # read twice: the clip and the step
    optimizers = [t.optimizer for t in targets]
    for opt in optimizers:
        opt.zero_grad(set_to_none=True)
    monitors = getattr(trainer, "monitors", None)
    watch = monitors.watched_step(targets) if monitors is not None else None
    with measuring_entropy(watch is not None, into=watch):
        done = accumulate_gradients(trainer, parts, loss_of, what=what, optimizers=optimizers)
    if done is None:
        return None
    norms = [
        apply_step(trainer, t.parameters, t.optimizer, agent=t.agent, scheduled=t.scheduled)
        for t in targets
    ]
    if watch is not None:
        watch.record(done[1])
    return StepResult(done[0], norms, done[1])
