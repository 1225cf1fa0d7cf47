"""The REINFORCE family's math in one module: the advantage estimators, both normalizations
(per group and over the update batch) and each completion's weight in the loss
(``loss_aggregation``). The policy losses, the clipped ratio, the z-score and the KL-to-reference
term are core's (:mod:`comlrl.core.algos.losses`): with this module, that is the whole objective.

Advantages for REINFORCE with a group baseline. Every estimator follows the registry's one contract,
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


def group_advantages(
    returns: torch.Tensor,
    config: Any,
    *,
    baseline: torch.Tensor | None = None,
    table: JointTable | None = None,
) -> torch.Tensor:
    """The advantages of ``[G, K]`` sibling ``returns``: ``advantage_mode``'s estimator (with
    each group's measured ``baseline`` and the nodes' joint ``table`` where it reads them),
    then, with ``advantage_normalization`` at scope ``group``, :func:`normalize_groups`. Batch
    scope needs the whole mini-batch and is :func:`batch_normalize`."""
    mode = config.advantage_mode
    adv = estimate(returns, mode, config, baseline, table)
    if config.advantage_normalization and config.advantage_normalization_scope == "group":
        adv = normalize_groups(adv, mode, table)
    return adv


def rms_scale(advantages: torch.Tensor) -> torch.Tensor:
    """``max(sqrt(mean(A^2)), STD_FLOOR)`` over the last dimension: the spread of each group's
    advantages about zero.

    Centred advantages (mean baseline) give the population std. The floor only matters when
    every advantage is (numerically) zero, which then stays (numerically) zero."""
    return advantages.pow(2).mean(-1, keepdim=True).sqrt().clamp(min=STD_FLOOR)


def batch_normalize(
    advantages: Sequence[torch.Tensor], moments: tuple[float, float, int] | None = None
) -> list[torch.Tensor]:
    """Each group's advantages z-scored over the whole mini-batch (REINFORCE++ style,
    ``advantage_normalization_scope="batch"``); ``moments`` are the batch's pooled over ranks
    (see :func:`comlrl.core.algos.losses.zscore` for them and the edge rule)."""
    flat = zscore(torch.cat(list(advantages)), moments)
    return list(torch.split(flat, [len(x) for x in advantages]))


# ------------------------------------------------------------------ row weights


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
