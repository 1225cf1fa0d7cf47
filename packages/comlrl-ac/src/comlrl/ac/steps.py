"""The optimisation steps of the actor-critic trainers: mini-batching a drained buffer, the
actor's step (REINFORCE with the critic's advantage, or its clipped-ratio form) and the
critic's regression step, each one padded forward per micro-batch."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch

from comlrl.ac.ppo import Row, advantage_divisors
from comlrl.ac.targets import value_error
from comlrl.ac.values import ValueModel
from comlrl.core.logprobs import micro_batches_for
from comlrl.core.rollout.record import ValueGroup
from comlrl.core.training import policy_update
from comlrl.core.training.policy_update import PolicyRows
from comlrl.core.training.train_step import Target, train_step


def mean_or_nan(values: Sequence[float]) -> float:
    """The mean, or NaN for an empty list (a step that was skipped)."""
    return float(np.mean(values)) if values else float("nan")


class StepLog:
    """Per-step values of an update (losses, norms, the ratio's metrics), averaged at the end.

    ``required`` names are always reported, as NaN when every step was skipped."""

    def __init__(self, *required: str):
        self.values: dict[str, list[float]] = {name: [] for name in required}

    def add(self, metrics: dict[str, float]) -> None:
        """Record one step's values."""
        for key, value in metrics.items():
            self.values.setdefault(key, []).append(value)

    def means(self) -> dict[str, float]:
        """Each name's mean over the recorded steps (NaN for none)."""
        return {key: mean_or_nan(values) for key, values in self.values.items()}


def actor_batches(
    trainer, groups: list[ValueGroup], rng: random.Random
) -> list[tuple[list[Row], list[float]]]:
    """Mini-batches of (rows, advantages) over the completions of ``groups``: core's
    :func:`~comlrl.core.training.policy_update.turn_row_minibatches` (advantages z-scored
    within each turn of the buffer when ``advantage_normalization``, each turn shuffled and
    cut into ``train_batch_size`` rows)."""
    a = trainer.args
    return policy_update.turn_row_minibatches(
        trainer,
        groups,
        a.train_batch_size,
        rng,
        normalize=a.advantage_normalization,
        num_turns=a.num_turns,
    )


def update_batches(
    trainer, groups: list[ValueGroup], rng: random.Random
) -> list[tuple[list[Row], list[float]]]:
    """The mini-batches of ``num_iterations`` passes over a drained buffer, each pass
    reshuffled; the advantages (and the critics' targets) stay those of the rollout."""
    passes = range(trainer.args.num_iterations)
    return [b for _ in passes for b in actor_batches(trainer, groups, rng)]


def policy_step(
    trainer, agent: int, batch: list[Row], advs: list[float]
) -> tuple[float, float, dict[str, float]] | None:
    """One actor step on core's policy step (:func:`comlrl.core.training.policy_update.policy_step`):
    ``L = -mean_b[log π(y_b | h_b) · Â_b]`` (summed token log-probs; ``loss_aggregation`` may
    average them per completion or per token instead, :func:`comlrl.ac.ppo.advantage_divisors`),
    or the registered ratio loss (``policy_loss="ppo"``: IPPO / MAPPO), one padded forward per
    micro-batch (rows grouped by length, so little padding; the loss is a sum over rows, so
    the grouping does not change it). Every row weighs 1: its advantage is already divided
    by its divisor. Returns the loss, the gradient norm and the ratio's metrics (none
    on-policy)."""
    divisors = advantage_divisors(trainer, batch)
    rows = PolicyRows(
        [g.prompt_ids for g, _ in batch],
        [g.completion_ids[k] for g, k in batch],
        [adv / div for adv, div in zip(advs, divisors)],
        [1.0] * len(batch),
        # actor_batches keeps each mini-batch within one turn (the monitors' per-turn view).
        turn=batch[0][0].turn,
        old=[g.old_logps[k] if g.old_logps else None for g, k in batch],
        layout="padded",  # keeps the forwards, and so the float sums, as they were
    )
    return policy_update.policy_step(
        trainer,
        agent,
        rows,
        optimizer=trainer.agent_optimizers[agent],
        what=f"{trainer.algorithm_name} actor (agent {agent}) loss",
    )


def critic_step(
    trainer,
    critic: ValueModel,
    opt,
    rows: list[list[int]],
    targets: list[float],
    old_values: list[float],
    pad_id: int,
    label: str,
) -> float | None:
    """One critic step on ``value_loss_coef · mean(value_error)``; returns the mean error.

    Rows with the same input (the K samples of one prompt share their state's value) are
    encoded once: each distinct row's value serves every sample that has it, so its gradient
    sums over them, exactly as if each were encoded alone. Distinct rows go through padded
    forwards in length order, cut by ``logprob_max_tokens``."""
    a = trainer.args
    members: dict[tuple[int, ...], list[int]] = {}
    for j, r in enumerate(rows):
        members.setdefault(tuple(r), []).append(j)
    distinct = sorted(members, key=len)

    def part_loss(idx):
        values = critic.last_token_values([list(distinct[u]) for u in idx], pad_id)
        # expand each distinct row's value to the samples that share it
        owners = [(pos, j) for pos, u in enumerate(idx) for j in members[distinct[u]]]
        values = values[[pos for pos, _ in owners]]
        idx = [j for _, j in owners]
        t = torch.tensor([targets[j] for j in idx], dtype=values.dtype, device=values.device)
        o = torch.tensor([old_values[j] for j in idx], dtype=values.dtype, device=values.device)
        err = value_error(values, t, o, a.value_clip_range)
        loss = a.value_loss_coef * err.sum() / len(rows)
        return loss, {"error_sum": err.detach().sum().item()}

    step = train_step(
        trainer,
        Target(critic.parameters(), opt),
        micro_batches_for(critic, [len(r) for r in distinct], a.logprob_max_tokens),
        part_loss,
        what=f"{trainer.algorithm_name} critic ({label}) loss",
    )
    if step is None:
        return None
    return step.total("error_sum") / len(rows)
