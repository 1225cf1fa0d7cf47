"""Advantages for REINFORCE with a group baseline.

Baselines per group of K sibling returns: mean (GRPO), none (raw REINFORCE), max (ReMax) and
leave-one-out (RLOO). Normalization keeps each baseline and divides a group's advantages by their
own root-mean-square ``s = sqrt(mean_k A_k^2)``, floored at ``STD_FLOOR``: for the mean baseline
that is the group's population std (GRPO), and in every mode ``|A_k| <= sqrt(K)``, so tied and
near-tied groups stay bounded. (Dividing un-centred raw returns by the returns' std instead made
a tied group's advantages ``R / 1e-6``.)

Raw mode has no baseline to keep, and dividing un-centred returns by their rms alone would map
every tied group to ±1 whatever its reward (``[0.01]*4`` and ``[1]*4`` alike). So normalizing
raw returns z-scores them within the group, as CoMLRL 1.4.3 did: the group mean is subtracted
first, which makes normalized raw advantages the mean baseline's. A tied group gets 0 in every
mode.
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
    """Baseline advantages, divided by their root-mean-square when ``normalize`` and K > 1
    (raw returns are centred on the group mean first: a z-score)."""
    adv = baseline_advantages(returns, mode)
    if normalize and adv.numel() > 1:
        if mode == "raw":
            adv = adv - adv.mean()
        adv = adv / rms_scale(adv)
    return adv


def fixed_baseline_advantages(
    returns: Sequence[float], baseline: float, normalize: bool
) -> torch.Tensor:
    """``R - b`` for a baseline ``b`` measured outside the group (ReMax: the reward of the
    greedy joint response), divided by the advantages' rms when ``normalize`` and K > 1."""
    adv = torch.as_tensor(list(returns), dtype=torch.float64) - float(baseline)
    if normalize and adv.numel() > 1:
        adv = adv / rms_scale(adv)
    return adv


def rms_scale(advantages: torch.Tensor) -> torch.Tensor:
    """``max(sqrt(mean(A^2)), STD_FLOOR)``: the spread of a group's advantages about zero.

    Centred advantages (mean baseline) give the population std. The floor only matters when
    every advantage is (numerically) zero, which then stays (numerically) zero."""
    return advantages.pow(2).mean().sqrt().clamp(min=STD_FLOOR)


def batch_normalize(
    advantages: torch.Tensor, moments: tuple[float, float, int] | None = None
) -> torch.Tensor:
    """Z-score over a whole update batch (REINFORCE++ style); see :func:`comlrl.core.stats.zscore`
    for ``moments`` and the edge rule."""
    return zscore(advantages, moments)
