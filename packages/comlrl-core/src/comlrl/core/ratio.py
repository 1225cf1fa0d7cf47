"""The clipped importance ratio that several families' policy losses share (PPO's surrogate).

A family keeps the log-probs its rollout policy gave each completion token (no gradient) and,
in each of several updates per rollout, weighs its advantages by the ratio of the current
policy to that rollout policy, clipped so that one rollout cannot move the policy far. The
REINFORCE family's registered ``ppo`` and ``gspo`` losses and the actor-critic family's
``ppo`` actor loss (IPPO / MAPPO) are built on these functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from comlrl.core.logprobs import TokenLogprobs


def clipped_surrogate(
    log_ratio: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    row_weights: torch.Tensor,
    eps_low: float,
    eps_high: float,
    token_log_ratio: torch.Tensor | None = None,
):
    """PPO's clipped surrogate ``-sum_r w_r sum_t min(rho A_r, clip(rho, 1-eps_low, 1+eps_high)
    A_r)`` with ``rho = exp(log_ratio)`` per token (``[rows, tokens]``), and its metrics:
    ``clip_fraction`` (share of tokens whose clipped branch is the active one) and
    ``approx_kl`` (mean ``rho - 1 - log rho`` over tokens of ``token_log_ratio``, default
    ``log_ratio``: the k3 estimate of KL(old || new) from tokens the old policy sampled)."""
    ratio = torch.exp(log_ratio)
    adv = advantages.unsqueeze(-1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped) * mask
    loss = (row_weights * per_token.sum(-1)).sum()
    with torch.no_grad():
        tokens = mask.sum().clamp(min=1.0)
        active = ((ratio < 1.0 - eps_low) & (adv < 0)) | ((ratio > 1.0 + eps_high) & (adv > 0))
        lr = log_ratio if token_log_ratio is None else token_log_ratio
        approx_kl = ((torch.exp(lr) - 1.0 - lr) * mask).sum() / tokens
        metrics = {
            "clip_fraction": float((active.float() * mask).sum() / tokens),
            "approx_kl": float(approx_kl),
        }
    return loss, metrics


def clip_range(config: Any) -> tuple[float, float]:
    """``(epsilon, epsilon_high)`` of the config; ``epsilon_high`` None is ``epsilon``."""
    low = float(config.epsilon)
    high = config.epsilon_high
    return low, low if high is None else float(high)


def token_ratio_loss(
    logps: TokenLogprobs,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    row_weights: torch.Tensor,
    config: Any,
):
    """The token-level clipped surrogate of ``logps`` against the rollout's ``old_logps``
    (``[rows, tokens]``, laid out as ``logps.values``) with the config's clip range.

    At the rollout policy every ratio is 1, so its gradient is that of
    ``-sum_r w_r A_r sum_t log pi(y_r,t)`` (the on-policy loss); its value is the surrogate's,
    ``-sum_r w_r A_r L_r`` for rows of ``L_r`` tokens."""
    mask = logps.mask
    log_ratio = (logps.values - old_logps) * mask
    low, high = clip_range(config)
    return clipped_surrogate(log_ratio, mask, advantages, row_weights, low, high)


def padded_rows(rows: Sequence[Sequence[float]], width: int, device) -> torch.Tensor:
    """Per-token values of each row, left-aligned and zero-padded to ``width`` columns (the
    layout of :class:`~comlrl.core.logprobs.TokenLogprobs`)."""
    out = torch.zeros((len(rows), width), dtype=torch.float32, device=device)
    for r, values in enumerate(rows):
        out[r, : len(values)] = torch.tensor(list(values)[:width], dtype=torch.float32)
    return out
