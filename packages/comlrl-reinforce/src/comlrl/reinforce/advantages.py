"""Advantages for REINFORCE with a group baseline.

Every estimator follows the registry's one contract,
``fn(returns, config, *, baseline=None, table=None) -> advantages`` over a ``[G, K]`` float64
tensor of G groups of K sibling returns (one row per group), so a whole update's groups go
through it at once. Normalization is a separate step
(:func:`normalize_groups`). Baselines per group: mean (GRPO), none (raw REINFORCE), max (ReMax) and
leave-one-out (RLOO), and MAReMax's greedy baseline, the reward of a greedy joint rollout
measured outside the group (registered with ``needs_baseline=True``, so the caller measures
each group's baseline and passes it). Normalization keeps each baseline and divides a group's advantages by their
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
from typing import Any

import torch

from comlrl.core import algos
from comlrl.core.algos import JointTable, register_advantage
from comlrl.core.algos.losses import STD_FLOOR, zscore


@register_advantage("mean")
def mean_baseline(r: torch.Tensor, config: Any = None, **_: Any) -> torch.Tensor:
    """GRPO: ``R - mean(R)`` over each group."""
    return r - r.mean(-1, keepdim=True)


@register_advantage("raw")
def no_baseline(r: torch.Tensor, config: Any = None, **_: Any) -> torch.Tensor:
    """REINFORCE: the returns themselves."""
    return r.clone()


@register_advantage("max")
def max_baseline(r: torch.Tensor, config: Any = None, **_: Any) -> torch.Tensor:
    """ReMax-style: ``R - max(R)`` over each group (the best sample gets 0)."""
    return r - r.max(-1, keepdim=True).values


@register_advantage("rloo")
def leave_one_out_baseline(r: torch.Tensor, config: Any = None, **_: Any) -> torch.Tensor:
    """RLOO: ``R_k - mean(R_j, j != k)``; groups of one fall back to the mean baseline."""
    k = r.shape[-1]
    if k <= 1:
        return r - r.mean(-1, keepdim=True)
    return (k * r - r.sum(-1, keepdim=True)) / (k - 1)


@register_advantage("greedy", needs_baseline=True)
def greedy_baseline(
    r: torch.Tensor, config: Any = None, *, baseline: torch.Tensor | None = None, **_: Any
) -> torch.Tensor:
    """MAReMax: ``R - b`` with ``b`` each group's greedy joint reward (``baseline``, ``[G]``)."""
    if baseline is None:
        raise ValueError("the greedy advantage needs each group's measured baseline.")
    return r - baseline.reshape(-1, 1).to(r.dtype)


@register_advantage("counterfactual", needs_joint_table=True)
def counterfactual_baseline(
    r: torch.Tensor, config: Any = None, *, table: JointTable | None = None, **_: Any
) -> torch.Tensor:
    """Counterfactual credit: completion k's mean return over the joint actions that hold it
    fixed (the other agents' samples varying), minus the node's mean return over all its joint
    actions; one row per group, from ``table`` (the nodes' joint tables, ``cross`` rollouts)."""
    if table is None:
        raise ValueError(
            "the counterfactual advantage needs each node's joint table (joint_mode='cross')."
        )
    groups, k = r.shape
    if table.returns.shape[0] != groups:
        raise ValueError(
            f"the joint table has {table.returns.shape[0]} rows for {groups} groups of returns."
        )
    joint = table.returns.to(torch.float64)
    index = table.index.to(torch.long)
    if len(index) and (int(index.min()) < 0 or int(index.max()) >= k):
        raise ValueError(f"joint table indices must lie in [0, {k}), one per completion.")
    totals = torch.zeros(groups, k, dtype=torch.float64).scatter_add_(1, index, joint)
    counts = torch.zeros(groups, k, dtype=torch.float64).scatter_add_(
        1, index, torch.ones_like(joint)
    )
    if bool((counts == 0).any()):
        raise ValueError(
            "a completion takes part in no joint action of its node's table; counterfactual "
            "credit needs every completion in the table (joint_mode='cross')."
        )
    return totals / counts - joint.mean(-1, keepdim=True)


def joint_scale(table: JointTable) -> torch.Tensor:
    """``[G, 1]``: each node's spread of joint returns about their mean, ``sqrt(mean_a (R(a) -
    mean R)^2)``, floored at ``STD_FLOOR``; the one divisor of every agent's counterfactual
    advantages at that node. Each agent's advantages are a main effect of the (balanced) cross
    table, so their mean square is at most the table's variance: ``|A_k| <= sqrt(K)`` still."""
    joint = table.returns.to(torch.float64)
    centred = joint - joint.mean(-1, keepdim=True)
    return centred.pow(2).mean(-1, keepdim=True).sqrt().clamp(min=STD_FLOOR)


def estimate(
    returns: torch.Tensor,
    mode: str,
    config: Any = None,
    baseline: torch.Tensor | None = None,
    table: JointTable | None = None,
) -> torch.Tensor:
    """The registered estimator ``mode`` over ``returns`` (``[G, K]``), with each group's
    measured ``baseline`` (``[G]``) and the nodes' joint ``table`` where the caller has them."""
    fn = algos.get("advantage", mode, "advantage_mode")
    return fn(returns, config, baseline=baseline, table=table)


def reads_joint_table(mode: str) -> bool:
    """Whether the estimator registered as ``mode`` reads the nodes' joint tables."""
    return bool(getattr(algos.get("advantage", mode, "advantage_mode"), "needs_joint_table", False))


def normalize_groups(
    advantages: torch.Tensor, mode: str, table: JointTable | None = None
) -> torch.Tensor:
    """Divide each group's advantages (a row of ``[G, K]``) by their root-mean-square, K > 1
    only; raw returns, which have no baseline, are centred on the group mean first. With
    ``table`` (an estimator that reads the joint tables) the divisor is each node's joint
    spread instead (:func:`joint_scale`), shared by the node's agents."""
    if advantages.shape[-1] <= 1:
        return advantages
    if table is not None:
        return advantages / joint_scale(table)
    if mode == "raw":
        advantages = advantages - advantages.mean(-1, keepdim=True)
    return advantages / rms_scale(advantages)


def group_advantages(returns: Sequence[float], mode: str, normalize: bool) -> torch.Tensor:
    """Baseline advantages of one group, divided by their root-mean-square when ``normalize``
    and K > 1 (raw returns are centred on the group mean first: a z-score)."""
    r = torch.as_tensor([list(returns)], dtype=torch.float64)
    adv = estimate(r, mode)
    return (normalize_groups(adv, mode) if normalize else adv)[0]


def fixed_baseline_advantages(
    returns: Sequence[float], baseline: float, normalize: bool
) -> torch.Tensor:
    """``R - b`` for a baseline ``b`` measured outside the group (ReMax: the reward of the
    greedy joint response), divided by the advantages' rms when ``normalize`` and K > 1."""
    r = torch.as_tensor([list(returns)], dtype=torch.float64)
    adv = estimate(r, "greedy", baseline=torch.tensor([float(baseline)], dtype=torch.float64))
    return (normalize_groups(adv, "greedy") if normalize else adv)[0]


def rms_scale(advantages: torch.Tensor) -> torch.Tensor:
    """``max(sqrt(mean(A^2)), STD_FLOOR)`` over the last dimension: the spread of each group's
    advantages about zero.

    Centred advantages (mean baseline) give the population std. The floor only matters when
    every advantage is (numerically) zero, which then stays (numerically) zero."""
    return advantages.pow(2).mean(-1, keepdim=True).sqrt().clamp(min=STD_FLOOR)


def batch_normalize(
    advantages: torch.Tensor, moments: tuple[float, float, int] | None = None
) -> torch.Tensor:
    """Z-score over a whole update batch (REINFORCE++ style); see
    :func:`comlrl.core.algos.losses.zscore` for ``moments`` and the edge rule."""
    return zscore(advantages, moments)
