"""The optimisation steps of the actor-critic trainers: mini-batching a drained buffer, the
actor's step (REINFORCE with the critic's advantage, or its clipped-ratio form) and the
critic's regression step, each one padded forward per micro-batch."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch

from comlrl.ac.ppo import Row, actor_loss, advantage_divisors
from comlrl.ac.targets import normalize_advantages, value_error
from comlrl.ac.values import ValueModel
from comlrl.core.dropout import dropout_off
from comlrl.core.logprobs import micro_batches, token_logprobs_parts
from comlrl.core.logprobs.budget import token_budget
from comlrl.core.rollout.record import ValueGroup
from comlrl.core.train_step import Target, train_step


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


def completion_rows(groups: Sequence[ValueGroup]) -> list[Row]:
    """Every completion of ``groups`` as a row (its group, its index there), in order."""
    return [(g, k) for g in groups for k in range(len(g.completion_ids))]


def actor_batches(
    trainer, groups: list[ValueGroup], rng: random.Random
) -> list[tuple[list[Row], list[float]]]:
    """Mini-batches of (rows, advantages) over the completions of ``groups``: advantages are
    z-scored within each turn of the buffer, then each turn is shuffled and cut into
    ``train_batch_size``."""
    a = trainer.args
    by_turn: dict[int, list[Row]] = {}
    for row in completion_rows(groups):
        by_turn.setdefault(row[0].turn, []).append(row)
    pooled = None
    if a.advantage_normalization:
        # One collective of a fixed shape (every possible turn index), whichever turns
        # this rank's share holds.
        turns = range(a.num_turns + 1)
        moments = [
            torch.tensor([float(g.advantages[k]) for g, k in by_turn.get(t, [])]) for t in turns
        ]
        pooled = trainer.sync.pooled_moments(moments)
    batches = []
    for turn in sorted(by_turn):
        rows = by_turn[turn]
        advs = [float(g.advantages[k]) for g, k in rows]
        if a.advantage_normalization:
            advs = normalize_advantages(advs, pooled[turn] if pooled else None)
        pairs = list(zip(rows, advs))
        rng.shuffle(pairs)
        for start in range(0, len(pairs), a.train_batch_size):
            chunk = pairs[start : start + a.train_batch_size]
            batches.append(([p[0] for p in chunk], [p[1] for p in chunk]))
    return batches


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
    """One actor step: ``L = -mean_b[log π(y_b | h_b) · Â_b]`` (summed token log-probs;
    ``loss_aggregation`` may average them per completion or per token instead), or
    its clipped-ratio form with ``policy_loss="ppo"`` (:func:`comlrl.ac.ppo.actor_loss`),
    one padded forward per micro-batch (rows grouped by length, so little padding; the loss
    is a sum over rows, so the grouping does not change it). Returns the loss, the gradient
    norm and the ratio's metrics (none on-policy)."""
    model, opt = trainer.agents[agent], trainer.agent_optimizers[agent]
    pad = trainer.tokenizers[agent].pad_token_id
    parts = token_logprobs_parts(
        model,
        [g.prompt_ids for g, _ in batch],
        [g.completion_ids[k] for g, k in batch],
        pad_id=pad,
        max_tokens=trainer.args.logprob_max_tokens,
        dedupe=False,  # keeps the forwards, and so the float sums, as they were
        layout="padded",
        temperature=trainer.args.temperature,  # the rollout's sampler
    )
    divisors = advantage_divisors(trainer, batch)

    def part_loss(part):
        idx, lp = part
        w = torch.tensor(
            [advs[j] / divisors[j] for j in idx], dtype=torch.float32, device=lp.values.device
        )
        return actor_loss(trainer.args, lp, w, [batch[j] for j in idx])

    # The parts run their forwards as they are reached, so inside the scope: no dropout, as
    # when the rollout sampled and its old log-probs were taken (a first-pass ratio of 1).
    with dropout_off(model):
        step = train_step(
            trainer,
            # actor_batches keeps each mini-batch within one turn (the monitors' per-turn view).
            Target(model.parameters(), opt, agent, turn=batch[0][0].turn),
            parts,
            part_loss,
            what=f"{trainer.algorithm_name} actor (agent {agent}) loss",
        )
    if step is None:
        return None
    return step.loss, step.grad_norm, step.means()


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
        micro_batches([len(r) for r in distinct], token_budget(a.logprob_max_tokens, critic)),
        part_loss,
        what=f"{trainer.algorithm_name} critic ({label}) loss",
    )
    if step is None:
        return None
    return step.total("error_sum") / len(rows)
