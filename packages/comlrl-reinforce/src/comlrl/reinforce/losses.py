"""Policy losses of the REINFORCE family, each a registered function (see
:mod:`comlrl.core.algos` for the contract), and the loss aggregations that weight rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from comlrl.core.algos import register_policy_loss
from comlrl.core.ratio import (
    SEQUENCE_LOG_RATIO_MAX,
    clip_range,
    clipped_surrogate,
    dual_clip,
    token_ratio_loss,
)


@register_policy_loss("reinforce")
def reinforce_loss(logps, old_logps, advantages, row_weights, config: Any):
    """REINFORCE with a baseline: ``L = -sum_r w_r * A_r * sum_t log pi(y_r,t | h_r)``.

    No ratio and no clipping: one update per rollout, on-policy."""
    loss = -(advantages * row_weights * logps.sequence_sum()).sum()
    return loss, {}


@register_policy_loss("ppo", needs_old_logps=True)
def ppo_loss(logps, old_logps, advantages, row_weights, config: Any):
    """Token-level clipped ratio (PPO; clip-higher with ``epsilon_high``): ``rho_t =
    pi(y_t) / pi_old(y_t)`` per token against the log-probs taken at rollout.

    At the rollout policy (the first of ``num_iterations`` passes) every ``rho_t`` is 1 and the
    gradient is the ``reinforce`` loss's; the loss value is the surrogate's."""
    return token_ratio_loss(logps, old_logps, advantages, row_weights, config)


@register_policy_loss("gspo", needs_old_logps=True)
def gspo_loss(logps, old_logps, advantages, row_weights, config: Any):
    """GSPO: one sequence-level ratio per completion, ``s_r = exp(mean_t log(pi/pi_old))``
    (its log clamped at ``SEQUENCE_LOG_RATIO_MAX``), clipped and dual-clipped as in PPO and
    shared by the completion's tokens. The config makes GSPO's rows weigh per sequence
    (``loss_aggregation="sequence_mean"``), so each completion's term is its own clipped
    surrogate whatever its length. At the rollout policy its gradient is the ``reinforce``
    loss's."""
    mask = logps.mask
    token_log_ratio = (logps.values - old_logps) * mask
    seq = token_log_ratio.sum(-1) / mask.sum(-1).clamp(min=1.0)
    seq = seq.clamp(max=SEQUENCE_LOG_RATIO_MAX)
    log_ratio = seq.unsqueeze(-1).expand_as(mask) * mask
    low, high = clip_range(config)
    return clipped_surrogate(
        log_ratio,
        mask,
        advantages,
        row_weights,
        low,
        high,
        token_log_ratio=token_log_ratio,
        clip_ratio_c=dual_clip(config),
    )


def row_weights(
    lengths: Sequence[int],
    group_sizes: Sequence[int],
    num_groups: int,
    mode: str,
    max_tokens: int,
    keep: Sequence[bool] | None = None,
    token_total: float | None = None,
) -> list[float]:
    """Each completion's weight in a mini-batch loss of ``num_groups`` groups (``mode`` is a
    ``loss_aggregation``), so that ``sum_r w_r * (sum of row r's token terms)`` is the loss.

    ``sum``, ``sequence_mean`` and ``constant``: every group (a node's K completions of one
    prompt) counts equally, a row of a group of K weighing ``1 / (K * num_groups)``, further
    divided by the row's own length (``sequence_mean``) or by ``max_tokens`` (``constant``).
    ``token_mean`` (DAPO): every token of the mini-batch weighs ``1 / (its total tokens)``.
    Rows with ``keep`` False (masked truncated completions) weigh 0 and their tokens do not
    count in ``token_mean``'s total. ``token_total`` replaces that total (see
    :func:`token_mean_total`: several ranks share one global token mean)."""
    keep = [True] * len(lengths) if keep is None else list(keep)
    if mode == "token_mean":
        total = kept_tokens(lengths, keep) if token_total is None else token_total
        return [1.0 / max(1.0, total) if kept else 0.0 for kept in keep]
    out = []
    for length, k, kept in zip(lengths, group_sizes, keep):
        w = 1.0 / (k * num_groups)
        if mode == "sequence_mean":
            w /= max(1, length)
        elif mode == "constant":
            w /= max_tokens
        out.append(w if kept else 0.0)
    return out


def kept_tokens(lengths: Sequence[int], keep: Sequence[bool] | None = None) -> int:
    """The number of tokens of the rows that stay in the loss."""
    keep = [True] * len(lengths) if keep is None else keep
    return sum(length for length, kept in zip(lengths, keep) if kept)


def token_mean_total(pooled_tokens: float, world_size: int) -> float:
    """The per-rank ``token_mean`` divisor that makes DAPO's token mean global over ranks.

    Gradients are averaged over the ``world_size`` ranks, so a token weighed ``1 / D`` on its
    rank weighs ``1 / (D · world_size)`` in the step; ``D = pooled_tokens / world_size`` (the
    kept tokens of every rank's mini-batch together) gives each token ``1 / pooled_tokens``,
    whatever share of the tokens its rank holds."""
    return float(pooled_tokens) / int(world_size)


def as_tensor(values: Sequence[float], device) -> torch.Tensor:
    """``values`` as a float32 tensor on ``device`` (the dtype the losses accumulate in)."""
    return torch.tensor(list(values), dtype=torch.float32, device=device)
