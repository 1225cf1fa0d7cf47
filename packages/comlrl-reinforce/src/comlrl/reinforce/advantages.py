"""Advantages for REINFORCE with a group baseline.

Baselines per group of K sibling returns: mean (GRPO), none (raw REINFORCE), max (ReMax) and
leave-one-out (RLOO). Normalization divides by the group's population std but keeps each
baseline, so the four modes stay distinct with normalization on (the reference re-centred after
the baseline, which made them all identical).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from comlrl.core import algos
from comlrl.core.algos import register_advantage
from comlrl.core.stats import STD_FLOOR, zscore


@register_advantage("mean")
def mean_baseline(r: torch.Tensor) -> torch.Tensor:
    """GRPO: ``R - mean(R)`` over the group."""
    return r - r.mean()


@register_advantage("raw")
def no_baseline(r: torch.Tensor) -> torch.Tensor:
    """REINFORCE: the returns themselves."""
    return r.clone()


@register_advantage("max")
def max_baseline(r: torch.Tensor) -> torch.Tensor:
    """ReMax-style: ``R - max(R)`` over the group (the best sample gets 0)."""
    return r - r.max()


@register_advantage("rloo")
def leave_one_out_baseline(r: torch.Tensor) -> torch.Tensor:
    """RLOO: ``R_k - mean(R_j, j != k)``; a group of one falls back to the mean baseline."""
    k = r.numel()
    if k <= 1:
        return r - r.mean()
    return (k * r - r.sum()) / (k - 1)


def baseline_advantages(returns: Sequence[float], mode: str) -> torch.Tensor:
    """``R - b`` for one group of sibling returns, ``b`` from the registered ``mode``."""
    r = torch.as_tensor(list(returns), dtype=torch.float64)
    return algos.get("advantage", mode, "advantage_mode")(r)


def group_advantages(returns: Sequence[float], mode: str, normalize: bool) -> torch.Tensor:
    """Baseline advantages, divided by the group std when ``normalize`` and K > 1."""
    adv = baseline_advantages(returns, mode)
    if normalize and adv.numel() > 1:
        std = torch.as_tensor(list(returns), dtype=torch.float64).std(unbiased=False)
        adv = adv / std.clamp(min=STD_FLOOR)
    return adv


def batch_normalize(
    advantages: torch.Tensor, moments: tuple[float, float, int] | None = None
) -> torch.Tensor:
    """Z-score over a whole update batch (REINFORCE++ style); see :func:`comlrl.core.stats.zscore`
    for ``moments`` and the edge rule."""
    return zscore(advantages, moments)
