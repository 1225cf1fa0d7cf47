"""The one optimizer-step skeleton every family's update runs: clear the gradients, then for
each part of the mini-batch take its loss, apply the non-finite policy and run its backward
pass, and finally take the optimizer step (:func:`comlrl.core.training.optim.apply_step`) of every
target. A family supplies only the parts (micro-batches) and how a part becomes a loss.

A part's loss is what its backward pass differentiates, already scaled to its share of the
mini-batch; the step's reported loss is the sum of those values. Whatever else the family wants
to log comes back per part in :attr:`StepResult.metrics`.

One agent at a time (:func:`agentwise_loss`): some losses couple every agent (the joint DPO margin sums every agent's log-ratio), yet each
agent's parameters enter only through that agent's own scores ``s_i``. The plain way builds
every agent's forward graph, then runs one backward: the activations of all N agents are alive
together, so the peak grows with N. Here the step instead

1. scores every agent without gradients, recording the random state before each forward;
2. builds the loss on detached copies of those scores and backpropagates it to them, which
   gives ``g_i = dL/ds_i`` (cheap: no model in that graph);
3. for each agent alone, scores again with gradients from the same random state (the same
   dropout draw) and backpropagates ``sum(s_i * g_i)``, whose gradient with respect to agent
   ``i``'s parameters is ``g_i * ds_i/dtheta_i`` = ``dL/dtheta_i`` by the chain rule.

The gradients equal the joint backward's; one agent's graph is alive at a time, for one extra
forward per agent without gradients. :func:`accumulate_gradients` runs step 3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from comlrl.core.checkpoint.rng import capture_rng, restore_rng
from comlrl.core.logprobs import measuring_entropy
from comlrl.core.training.host import StepHost
from comlrl.core.training.optim import apply_step, loss_is_usable
from comlrl.core.training.precision import compute_context

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
    host: StepHost, parts: Iterable[Any], loss_of: PartLoss, *, what: str, optimizers: Sequence[Any]
) -> tuple[float, dict[str, list[float]]] | None:
    """The backward half of a step: per part ``loss_of(part)`` (a loss, or a loss and its
    metrics), the finite check of ``nonfinite_loss``, ``backward``. Gradients add to what the
    parameters hold. Returns the summed loss and the reported values, or None when a
    non-finite loss was skipped (the gradients of ``optimizers`` are then cleared); under
    ``nonfinite_loss='raise'`` a non-finite loss raises ``FloatingPointError``. ``parts`` may be
    lazy: each is drawn after the previous part's backward, so one part's graph is alive. A
    part's loss may be an :class:`AgentwiseLoss`, backpropagated one agent at a time. With
    ``bf16=True`` each part's forward and loss run under bf16 autocast
    (:mod:`comlrl.core.training.precision`), its backward outside."""
    total = 0.0
    reported: dict[str, list[float]] = {}
    device = _device_of(optimizers)
    parts = iter(parts)
    while True:
        # The forward (drawn with the part) and the loss run under bf16 autocast with
        # ``bf16=True``; the backward runs outside it, as autocast asks.
        with compute_context(host.args, device):
            part = next(parts, _END)
            if part is _END:
                break
            out = loss_of(part)
        loss, metrics = out if isinstance(out, tuple) else (out, {})
        joint = loss.loss if isinstance(loss, AgentwiseLoss) else loss
        if not loss_is_usable(host, joint, what, optimizers):
            return None
        if isinstance(loss, AgentwiseLoss):
            loss.backward(lambda: compute_context(host.args, device))
        else:
            loss.backward()
        total += joint.item()
        for key, value in metrics.items():
            reported.setdefault(key, []).append(value)
    return total, reported


def train_step(
    host: StepHost,
    targets: Target | Sequence[Target],
    parts: Iterable[Any],
    loss_of: PartLoss,
    *,
    what: str,
) -> StepResult | None:
    """One optimizer step over ``parts``: ``zero_grad`` of every target, the parts' backward
    passes (:func:`accumulate_gradients`), then :func:`~comlrl.core.training.optim.apply_step` of every
    target in order. ``what`` names the loss in the non-finite messages; None means a
    non-finite loss was skipped and nothing stepped. A step the run's monitors watch (see
    :class:`Target`) measures token entropy in its forwards and reports to them once it
    succeeded."""
    targets = [targets] if isinstance(targets, Target) else list(targets)
    for t in targets:
        t.parameters = list(t.parameters)  # read twice: the clip and the step
    optimizers = [t.optimizer for t in targets]
    for opt in optimizers:
        opt.zero_grad(set_to_none=True)
    monitors = host.monitors
    watch = monitors.watched_step(targets) if monitors is not None else None
    with measuring_entropy(watch is not None, into=watch):
        done = accumulate_gradients(host, parts, loss_of, what=what, optimizers=optimizers)
    if done is None:
        return None
    norms = [
        apply_step(host, t.parameters, t.optimizer, agent=t.agent, scheduled=t.scheduled)
        for t in targets
    ]
    # The gradients are spent: freed now rather than at this target's next step, so they are
    # not alive while the other agents (and critics) run their passes.
    for opt in optimizers:
        opt.zero_grad(set_to_none=True)
    if watch is not None:
        watch.record(done[1])
    return StepResult(done[0], norms, done[1])


# ``scores(grad)``: one agent's scores, with or without gradients.
Scores = Callable[[bool], torch.Tensor]


@dataclass
class AgentwiseLoss:
    """A loss built on detached agent scores, with what it takes to backpropagate it agent by
    agent (:func:`agentwise_loss` builds it)."""

    loss: torch.Tensor
    scores: list[torch.Tensor]
    rescore: list[Scores]
    states: list[Any]
    after: Any

    def backward(self, context: Callable[[], AbstractContextManager]) -> None:
        """The agent-by-agent backward; each forward again runs under ``context()`` (the
        step's autocast)."""
        self.loss.backward()
        for score, leaf, state in zip(self.rescore, self.scores, self.states):
            if leaf.grad is None:
                continue
            restore_rng(*state)
            with context(), torch.enable_grad():
                values = score(True)
            if values.requires_grad:
                (values * leaf.grad.to(values.dtype)).sum().backward()
        restore_rng(*self.after)


def agentwise_loss(
    scores: Sequence[Scores], loss_of: Callable[[list[torch.Tensor]], torch.Tensor]
) -> AgentwiseLoss:
    """Score each agent without gradients (``scores[i](False)``), then the loss
    ``loss_of(values)`` on leaf copies of the values; the returned object's backward is agent by
    agent (see the module docstring). Each ``scores[i]`` must be repeatable: ``scores[i](True)``
    from the same random state returns the same values, now with gradients."""
    states, leaves = [], []
    for score in scores:
        states.append(capture_rng())
        with torch.no_grad():
            values = score(False)
        leaves.append(values.detach().requires_grad_(True))
    after = capture_rng()
    return AgentwiseLoss(loss_of(leaves), leaves, list(scores), states, after)
