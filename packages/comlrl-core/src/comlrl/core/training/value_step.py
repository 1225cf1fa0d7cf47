"""A critic's regression step, owned by core: one optimizer step of a value model towards its
targets, on :func:`~comlrl.core.training.train_step.train_step` like every other step.

A family says what the critic reads and aims at (:class:`ValueRows`: each row's tokens, TD
target and the estimate the rollout saw) and its per-row error (the family's math, e.g. a
clipped squared error); core encodes each distinct row once, cuts the forwards by the token
budget and steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from comlrl.core.logprobs.planning import micro_batches_for
from comlrl.core.logprobs.values import last_token_values
from comlrl.core.training.host import StepHost
from comlrl.core.training.train_step import Target, train_step

# ``error(values, targets, old_values) -> per-row error``, all ``[rows]`` tensors.
RowError = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class ValueRows:
    """One mini-batch of a critic's step: the critic (``body`` and ``head``; ``params`` and
    ``optimizer`` are what the step updates), each row's tokens (``inputs``), TD target and
    rollout-time estimate, the per-row ``error``, its weight ``coef`` in the loss
    (``value_loss_coef``), the pad id and a label for the non-finite messages."""

    body: nn.Module
    head: nn.Module
    params: Iterable[Any]
    optimizer: Any
    inputs: list[list[int]]
    targets: list[float]
    old_values: list[float]
    error: RowError
    coef: float
    pad_id: int
    label: str


def value_step(host: StepHost, rows: ValueRows) -> float | None:
    """One critic step on ``coef · mean(error)``; returns the mean error, or None when a
    non-finite loss skipped the step.

    Rows with the same tokens (the K samples of one prompt share their state's value) are
    encoded once: each distinct row's value serves every sample that has it, so its gradient
    sums over them exactly as if each were encoded alone. Distinct rows run in padded forwards
    in length order, cut by ``logprob_max_tokens``."""
    size = len(rows.inputs)
    members: dict[tuple[int, ...], list[int]] = {}
    for j, r in enumerate(rows.inputs):
        members.setdefault(tuple(r), []).append(j)
    distinct = sorted(members, key=len)

    def part_loss(idx):
        inputs = [list(distinct[u]) for u in idx]
        values = last_token_values(rows.body, rows.head, inputs, rows.pad_id)
        # each distinct row's value, once per sample that shares it
        owners = [(pos, j) for pos, u in enumerate(idx) for j in members[distinct[u]]]
        values = values[[pos for pos, _ in owners]]
        picked = [j for _, j in owners]
        target = torch.tensor(
            [rows.targets[j] for j in picked], dtype=values.dtype, device=values.device
        )
        old = torch.tensor(
            [rows.old_values[j] for j in picked], dtype=values.dtype, device=values.device
        )
        err = rows.error(values, target, old)
        return rows.coef * err.sum() / size, {"error_sum": err.detach().sum().item()}

    step = train_step(
        host,
        Target(rows.params, rows.optimizer),
        micro_batches_for(rows.body, [len(r) for r in distinct], host.args.logprob_max_tokens),
        part_loss,
        what=f"{host.algorithm_name} critic ({rows.label}) loss",
    )
    if step is None:
        return None
    return step.total("error_sum") / size
