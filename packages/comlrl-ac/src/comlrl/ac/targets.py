"""The actor-critic arithmetic: TD(0) targets, advantages, value losses and diagnostics.

There is no GAE and no λ-return: at turn ``t`` of an episode the critic's target is
``r_t + γ·V_old(h_{t+1})``, or ``r_t`` at the last turn (also after early termination), and the
advantage is the TD error ``target - V_old(h_t)``. With a Q critic, ``Q_old`` replaces ``V_old``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from comlrl.core.stats import zscore


def td_target(reward: float, next_value: float | None, discount: float) -> float:
    """``reward + discount * next_value``; just ``reward`` when the episode ends here."""
    if next_value is None:
        return float(reward)
    return float(reward) + float(discount) * float(next_value)


def reward_to_go(rewards: Sequence[float], discount: float) -> list[float]:
    """``G_t = r_t + γ·G_{t+1}`` along one trajectory."""
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + float(discount) * running
        out[t] = running
    return out


def normalize_advantages(
    advantages: Sequence[float], moments: tuple[float, float, int] | None = None
) -> list[float]:
    """Z-score of a buffer's advantages (see :func:`comlrl.core.stats.zscore`: population std
    floored at 1e-6, pooled ``moments`` in multi-process runs, a single value left as is)."""
    return zscore(
        torch.tensor([float(a) for a in advantages], dtype=torch.float64), moments
    ).tolist()


def value_error(
    values: torch.Tensor,
    targets: torch.Tensor,
    old_values: torch.Tensor,
    clip_range: float | None,
) -> torch.Tensor:
    """Per-sample squared error of the critic; with ``clip_range`` the PPO-style pessimistic
    error ``max((t - V)², (t - V_old - clip(V - V_old, ±c))²)``."""
    err = (targets - values) ** 2
    if clip_range is None:
        return err
    clipped = old_values + (values - old_values).clamp(-clip_range, clip_range)
    return torch.maximum(err, (targets - clipped) ** 2)


def explained_variance(values: Sequence[float], targets: Sequence[float]) -> float:
    """``1 - Var(target - value) / Var(target)``: 1 is a perfect critic, 0 no better than a
    constant; NaN when the targets do not vary."""
    if len(targets) < 2:
        return float("nan")
    t = torch.tensor([float(x) for x in targets], dtype=torch.float64)
    v = torch.tensor([float(x) for x in values], dtype=torch.float64)
    var_t = t.var(unbiased=False).item()
    if var_t <= 0.0 or not math.isfinite(var_t):
        return float("nan")
    return 1.0 - (t - v).var(unbiased=False).item() / var_t


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population std (NaN for an empty list)."""
    if not values:
        return float("nan"), float("nan")
    t = torch.tensor([float(x) for x in values], dtype=torch.float64)
    return t.mean().item(), t.std(unbiased=False).item()


def spread_values(flat: Sequence[float], counts: Sequence[int], per_action: bool) -> list:
    """Per-node value lists from one flat critic output.

    ``counts`` holds each node's number of joint actions. A Q critic (``per_action``) scored one
    row per joint action; a V critic scored one row per node, whose value every action shares.
    """
    out, pos = [], 0
    for count in counts:
        if per_action:
            out.append(flat[pos : pos + count])
            pos += count
        else:
            out.append([flat[pos]] * count)
            pos += 1
    return out
