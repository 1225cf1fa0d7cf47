"""The actor-critic arithmetic: TD targets, GAE(λ) advantages, value losses and diagnostics.

At turn ``t`` of an episode the TD error is ``δ_t = r_t + γ·V_old(h_{t+1}) - V_old(h_t)``, with
no bootstrap at the last turn (also after early termination). The advantage is GAE(λ),
``A_t = Σ_l (γλ)^l δ_{t+l}`` along the trajectory, and the critic's target the λ-return
``A_t + V_old(h_t)``. ``gae_lambda=0`` (the default) leaves the TD(0) advantage ``δ_t`` and
target ``r_t + γ·V_old(h_{t+1})``; ``gae_lambda=1`` gives the discounted Monte-Carlo return
minus ``V_old(h_t)``.

A Q critic scores ``Q_old(h, a)`` for each joint action of a node. Its targets bootstrap with
``V(h') = mean_k Q_old(h', a'_k)`` over the next node's joint actions (the sampled actions'
Monte-Carlo estimate of ``E_pi Q``). Its actor advantage is ``Q_old(h, a) - V(h)`` with
``V(h)`` the same mean over the node's own joint actions: the TD error
``r + γV(h') - Q(h, a)`` would have zero mean for every action once Q is accurate, leaving the
buffer z-score nothing but critic noise to scale up. A node with a single joint action has no
sibling to estimate ``V(h)`` from, so its advantage is ``Q_old(h, a)`` itself (the buffer
z-score then centres it across the buffer).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from comlrl.core.algos.losses import zscore
from comlrl.core.training.value_step import ValueRows


def td_target(reward: float, next_value: float | None, discount: float) -> float:
    """``reward + discount * next_value``; just ``reward`` when the episode ends here."""
    if next_value is None:
        return float(reward)
    return float(reward) + float(discount) * float(next_value)


def bootstrap_value(child_values: Sequence[float], per_action: bool) -> float:
    """The next node's value for a TD target: a V critic's one estimate (every action of a
    node shares it), or the mean of a Q critic's estimates over the node's joint actions."""
    if per_action:
        return float(sum(float(v) for v in child_values) / len(child_values))
    return float(child_values[0])


def q_advantages(q_values: Sequence[float]) -> list[float]:
    """``Q(h, a_k) - mean_j Q(h, a_j)`` for one node's joint actions; ``Q(h, a)`` itself when
    the node has a single action (no sibling to estimate ``V(h)`` from)."""
    qs = [float(q) for q in q_values]
    if len(qs) < 2:
        return qs
    baseline = sum(qs) / len(qs)
    return [q - baseline for q in qs]


def reward_to_go(rewards: Sequence[float], discount: float) -> list[float]:
    """``G_t = r_t + γ·G_{t+1}`` along one trajectory."""
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + float(discount) * running
        out[t] = running
    return out


def gae_advantages(
    rewards: Sequence[float], values: Sequence[float], discount: float, lam: float
) -> list[float]:
    """GAE(λ) along one trajectory that ends after its last step (no bootstrap there).

    ``rewards[t]`` and ``values[t]`` are the step's reward and ``V_old(h_t)``; the result is
    ``A_t = δ_t + γλ·A_{t+1}``, i.e. ``Σ_l (γλ)^l δ_{t+l}``.
    """
    if len(rewards) != len(values):
        raise ValueError(
            f"values must have one entry per reward: got {len(values)} values for "
            f"{len(rewards)} rewards."
        )
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        next_value = values[t + 1] if t + 1 < len(values) else None
        delta = td_target(rewards[t], next_value, discount) - float(values[t])
        running = delta + float(discount) * float(lam) * running
        out[t] = running
    return out


def lambda_returns(
    rewards: Sequence[float], values: Sequence[float], discount: float, lam: float
) -> list[float]:
    """The critic's λ-return targets ``A_t + V_old(h_t)`` along one trajectory."""
    advs = gae_advantages(rewards, values, discount, lam)
    return [a + float(v) for a, v in zip(advs, values)]


def gae_tails(
    deltas: Sequence[Sequence[float]],
    children: Sequence[Sequence[int | None]],
    discount: float,
    lam: float,
) -> list[list[float]]:
    """What GAE(λ) adds to each joint action's TD error over a rollout tree.

    ``deltas[j][k]`` is the TD error of joint action ``k`` at node ``j``; ``children[j][k]``
    the index of the node it leads to, or None where the episode ends. Nodes are in pre-order
    (every child after its parent). The tail is ``γλ`` times the mean advantage over the
    child's joint actions, and 0.0 where the episode ends: the advantage is ``δ + tail`` and the
    λ-return is the TD(0) target plus the tail, so single-turn numbers stay exactly TD(0)'s.
    """
    if len(children) != len(deltas):
        raise ValueError(
            f"children must have one entry per node: got {len(children)} for {len(deltas)} nodes."
        )
    advs = [[float(d) for d in row] for row in deltas]
    tails = [[0.0] * len(row) for row in deltas]
    for j in range(len(deltas) - 1, -1, -1):
        if len(children[j]) != len(deltas[j]):
            raise ValueError(
                f"children[{j}] must have one entry per joint action ({len(deltas[j])}), "
                f"got {len(children[j])}."
            )
        for k, child in enumerate(children[j]):
            if child is None:
                continue
            if not j < child < len(deltas):
                raise ValueError(
                    f"children[{j}][{k}] must index a later node (pre-order), got {child}."
                )
            later = advs[child]
            tails[j][k] = float(discount) * float(lam) * (sum(later) / len(later))
            advs[j][k] = float(deltas[j][k]) + tails[j][k]
    return tails


def tree_gae(
    deltas: Sequence[Sequence[float]],
    children: Sequence[Sequence[int | None]],
    discount: float,
    lam: float,
) -> list[list[float]]:
    """GAE(λ) advantages over a rollout tree (arguments as in :func:`gae_tails`).

    A chain (one joint action per node) gives exactly :func:`gae_advantages`; the K actions of
    a single turn keep their TD errors.
    """
    tails = gae_tails(deltas, children, discount, lam)
    return [[float(d) + t for d, t in zip(row, tail)] for row, tail in zip(deltas, tails)]


def fill_critic_targets(
    groups: Sequence[Any],
    values: Sequence[Sequence[float]],
    children: Sequence[Sequence[int | None]],
    discount: float,
    lam: float,
    per_action: bool,
) -> None:
    """Set the critic's fields of one agent's rollout groups (one per tree node, pre-order):
    ``values`` (``values[j][k]``, the critic's estimate for joint action k at node j, which in
    the aligned rollouts of this family is completion k), the TD(0) ``targets`` from the groups'
    shaped rewards (λ-returns with ``lam`` > 0) and the ``advantages`` (GAE(λ); ``Q - V`` for
    a Q critic, ``per_action``). ``children`` is as in :func:`gae_tails`."""
    for j, g in enumerate(groups):
        g.values = [float(v) for v in values[j]]
        g.targets = [
            td_target(r, None if c is None else bootstrap_value(values[c], per_action), discount)
            for r, c in zip(g.rewards, children[j])
        ]
        g.advantages = [t - v for t, v in zip(g.targets, g.values)]
    if lam > 0.0:
        tails = gae_tails([g.advantages for g in groups], children, discount, lam)
        for g, tail in zip(groups, tails):
            g.advantages = [a + t for a, t in zip(g.advantages, tail)]
            g.targets = [v + t for v, t in zip(g.targets, tail)]
    if per_action:
        # Q - V: the TD error against Q(h, a) itself carries no signal (see the module doc).
        for g, qs in zip(groups, values):
            g.advantages = q_advantages(qs)


def normalize_advantages(
    advantages: Sequence[float], moments: tuple[float, float, int] | None = None
) -> list[float]:
    """Z-score of a buffer's advantages (see :func:`comlrl.core.algos.losses.zscore`: population std
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


def critic_rows(
    args: Any,
    critic: Any,
    optimizer: Any,
    inputs: list[list[int]],
    targets: list[float],
    old_values: list[float],
    pad_id: int,
    label: str,
) -> ValueRows:
    """One mini-batch of a critic's regression (core's
    :func:`~comlrl.core.training.value_step.value_step`): ``critic`` (a body with its
    ``value_head``) towards the TD ``targets`` on :func:`value_error` (clipped by
    ``value_clip_range``), weighted by ``value_loss_coef``."""
    clip = args.value_clip_range
    return ValueRows(
        body=critic.backbone,
        head=critic.value_head,
        params=critic.parameters(),
        optimizer=optimizer,
        inputs=inputs,
        targets=targets,
        old_values=old_values,
        error=lambda values, t, old: value_error(values, t, old, clip),
        coef=args.value_loss_coef,
        pad_id=pad_id,
        label=label,
    )


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
