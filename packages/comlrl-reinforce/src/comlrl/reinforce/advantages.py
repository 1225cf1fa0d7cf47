"""Advantages for REINFORCE with a group baseline.

Baselines per group of K sibling returns: mean (GRPO), none (raw REINFORCE), max (ReMax) and
leave-one-out (RLOO). Normalization divides by the group's population std but keeps each
baseline, so the four modes stay distinct with normalization on (the reference re-centred after
the baseline, which made them all identical).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

STD_FLOOR = 1e-6


def baseline_advantages(returns: Sequence[float], mode: str) -> torch.Tensor:
    """``R - b`` for one group of sibling returns."""
    r = torch.as_tensor(list(returns), dtype=torch.float64)
    k = r.numel()
    if mode == "mean":
        return r - r.mean()
    if mode == "raw":
        return r.clone()
    if mode == "max":
        return r - r.max()
    if mode == "rloo":
        if k <= 1:
            return r - r.mean()
        return (k * r - r.sum()) / (k - 1)
    raise ValueError(f"advantage_mode must be one of mean, raw, max, rloo; got {mode!r}.")


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
    """Z-score over a whole update batch (REINFORCE++ style).

    ``moments`` (mean, population std, count) replaces the batch's own statistics: in a
    multi-process run they are pooled over every rank's share of the batch.
    """
    if moments is not None:
        mean, std, count = moments
        if count <= 1:
            return advantages - mean
        return (advantages - mean) / max(std, STD_FLOOR)
    if advantages.numel() <= 1:
        return advantages - advantages.mean()
    return (advantages - advantages.mean()) / advantages.std(unbiased=False).clamp(min=STD_FLOOR)
