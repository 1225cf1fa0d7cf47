"""KL to the reference in the REINFORCE family: where it goes (reward or loss), the loss term,
and multi-turn credit, which carries later turns' KL back to earlier turns' returns.

KL in the reward (``reference_kl_enabled``) subtracts ``reference_kl_coef * KL`` from the reward
of each completion; the return of a completion then includes the discounted KL of the later
turns it led to, just as it includes their rewards. KL in the loss (``beta``) adds
``beta * KL`` per token to the loss, aggregated with the policy loss's row weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from comlrl.core.reference import estimator_for, token_kl
from comlrl.core.rollout.tree import TreeNode


def check_kl_placement(config: Any) -> None:
    """Refuse a KL in both the reward and the loss, and a KL estimator that does nothing where it
    is used; each ValueError names the field."""
    if config.reference_kl_enabled and config.beta > 0:
        raise ValueError(
            f"beta={config.beta} puts a KL term in the loss while reference_kl_enabled=True puts "
            "one in the reward; choose one (beta=0 for KL in the reward, or "
            "reference_kl_enabled=False for KL in the loss)."
        )
    if config.beta > 0 and config.reference_kl_estimator == "k1":
        raise ValueError(
            "reference_kl_estimator='k1' with beta > 0: k1 in the loss has zero expected "
            "gradient, so the KL term would do nothing; use k2 or k3 (or None, which is k3) in "
            "the loss, or k1 in the reward (reference_kl_enabled=True, beta=0)."
        )


def kl_loss_term(
    logps, ref_logps: torch.Tensor, row_weights: torch.Tensor, beta: float, estimator: str
) -> tuple[torch.Tensor, dict[str, float]]:
    """``beta * sum_r w_r * sum_t KL_t`` over the rows of ``logps`` (a TokenLogprobs with grad),
    ``ref_logps`` the reference's per-token log-probs in the same layout. Returns the term and
    the mean per-token KL estimate (``kl``)."""
    mask = logps.mask
    kl = token_kl(logps.values * mask, ref_logps * mask, estimator) * mask
    term = beta * (row_weights * kl.sum(-1)).sum()
    tokens = mask.sum().clamp(min=1.0)
    return term, {"kl": float(kl.detach().sum() / tokens)}


def loss_estimator(config: Any) -> str:
    """The estimator of the loss's KL term."""
    return estimator_for(config, "loss")


def carried_kls(
    nodes: Sequence[TreeNode], own: Sequence[Sequence[float]], agent: int, discount: float
) -> list[list[float]]:
    """For each node of ``nodes`` and each of ``agent``'s completions there: its own KL plus the
    discounted KL-to-go of the turns it led to, credited as the tree credits returns.

    ``own[j][k]`` is the KL of completion k at ``nodes[j]``. A joint action's KL-to-go is the
    agent's KL in that action plus ``discount`` times the mean KL-to-go of its child's actions;
    a completion's is the mean over the joint actions that used it (aligned: the one action)."""
    index = {id(node): j for j, node in enumerate(nodes)}
    to_go: dict[int, list[float]] = {}

    def action_values(node: TreeNode) -> list[float]:
        key = id(node)
        if key not in to_go:
            kls = own[index[key]]
            values = []
            for a, action in enumerate(node.joint_actions):
                value = kls[action[agent]]
                child = node.children[a] if node.children else None
                if child is not None and id(child) in index:
                    below = action_values(child)
                    value += discount * sum(below) / len(below)
                values.append(value)
            to_go[key] = values
        return to_go[key]

    out = []
    for j, node in enumerate(nodes):
        values = action_values(node)
        k = len(own[j])
        totals, counts = [0.0] * k, [0] * k
        for a, action in enumerate(node.joint_actions):
            totals[action[agent]] += values[a]
            counts[action[agent]] += 1
        out.append([t / c if c else 0.0 for t, c in zip(totals, counts)])
    return out
