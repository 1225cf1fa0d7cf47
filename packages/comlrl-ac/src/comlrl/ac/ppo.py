"""The actor's loss of the actor-critic family: a registered policy loss, chosen by
``policy_loss`` from core's registry (:mod:`comlrl.core.algos.losses`): on-policy REINFORCE
with the critic's advantage (``reinforce``, as in 1.4.3), PPO's clipped token ratio to the
rollout policy (``ppo``, which makes IAC IPPO and MAAC MAPPO and lets ``num_iterations`` passes
reuse one rollout), GSPO's sequence ratio, or any loss registered by name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from comlrl.core import algos
from comlrl.core.algos.losses import padded_rows
from comlrl.core.logprobs import TokenLogprobs
from comlrl.core.rollout.record import ValueGroup
from comlrl.core.training.policy_update import PolicyRows, policy_step, require_old_logps

# One completion of the buffer in an update: its group and its index there.
Row = tuple[ValueGroup, int]


def policy_loss_of(args: Any) -> Callable:
    """The registered policy loss that ``args.policy_loss`` names."""
    return algos.get("policy_loss", args.policy_loss, "policy_loss")


def advantage_divisors(trainer: Any, batch: Sequence[Row]) -> list[float]:
    """What each row's advantage is divided by in the actor's loss (``loss_aggregation``):
    the mini-batch size (``sum``), times the row's completion length (``sequence_mean``), or
    the mini-batch's completion tokens (``token_mean``; under several processes every rank's
    together over the world size, so the token mean is the step's)."""
    mode = trainer.args.loss_aggregation
    size = len(batch)
    if mode == "sum":
        return [size] * size
    lengths = [max(1, len(g.completion_ids[k])) for g, k in batch]
    if mode == "sequence_mean":
        return [size * n for n in lengths]
    tokens = float(sum(lengths))
    if trainer.dist.is_distributed:
        tokens = round(trainer.sync.pooled_total(tokens)) / trainer.dist.world_size
    return [tokens] * size


def actor_rows(trainer: Any, agent: int, batch: tuple[list[Row], list[float]]) -> PolicyRows:
    """One mini-batch of the actor's step as core's policy step takes it
    (:func:`comlrl.core.training.policy_update.policy_step`): ``L = -mean_b[log π(y_b | h_b) ·
    Â_b]`` (summed token log-probs; ``loss_aggregation`` may average them per completion or
    per token instead, :func:`advantage_divisors`), or the registered ratio loss
    (``policy_loss="ppo"``: IPPO / MAPPO). ``batch`` is core's row mini-batch (rows, their
    advantages). Every row weighs 1: its advantage is already divided by its divisor; the
    forwards are padded, rows grouped by length (the loss is a sum over rows, so the grouping
    does not change it)."""
    rows, advs = batch
    divisors = advantage_divisors(trainer, rows)
    return PolicyRows(
        [g.prompt_ids for g, _ in rows],
        [g.completion_ids[k] for g, k in rows],
        [adv / div for adv, div in zip(advs, divisors)],
        [1.0] * len(rows),
        # core's row mini-batches stay within one turn (the monitors' per-turn view)
        turn=rows[0][0].turn,
        old=[g.old_logps[k] if g.old_logps else None for g, k in rows],
        layout="padded",  # the layout the rollout log-probs were taken in (ratio 1 to the bit)
    )


def actor_step(trainer: Any, agent: int, batch: tuple[list[Row], list[float]]):
    """Core's policy step of ``agent``'s actor on one row mini-batch (:func:`actor_rows`)."""
    what = f"{trainer.algorithm_name} actor (agent {agent}) loss"
    return policy_step(trainer, agent, actor_rows(trainer, agent, batch), what=what)


def actor_loss(
    args: Any,
    logps: TokenLogprobs,
    weighted_advantages: torch.Tensor,
    batch: Sequence[Row],
) -> tuple[torch.Tensor, dict[str, float]]:
    """The actor's loss over one micro-batch and its metrics.

    ``weighted_advantages`` holds each row's advantage already divided by its
    :func:`advantage_divisors`, so every row weighs 1 in the registered loss (the on-policy
    loss is ``-sum_b w_b · sum_t log pi(y_b,t)``); ``batch`` the rows (their groups'
    ``old_logps`` feed a ratio loss). The loss lies on the device of ``weighted_advantages``.
    With ``ppo`` at the rollout policy every ratio is 1 and the gradient is exactly the
    on-policy one; the logged value is then the surrogate's."""
    w = weighted_advantages
    fn = policy_loss_of(args)
    device = logps.values.device
    old = None
    if getattr(fn, "needs_old_logps", False):
        require_old_logps(args, [g.old_logps[k] if g.old_logps else None for g, k in batch])
        old = padded_rows([g.old_logps[k] for g, k in batch], logps.values.shape[1], device)
    ones = torch.ones(len(batch), dtype=torch.float32, device=device)
    loss, metrics = fn(logps, old, w.to(device), ones, args)
    return loss.to(w.device), metrics
