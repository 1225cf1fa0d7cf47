"""Policy losses of the REINFORCE family, each a registered function (see
:mod:`comlrl.core.algos` for the contract), and the loss aggregations that weight rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from comlrl.core.algos import register_policy_loss


@register_policy_loss("reinforce")
def reinforce_loss(logps, old_logps, advantages, row_weights, config: Any):
    """REINFORCE with a baseline: ``L = -sum_r w_r * A_r * sum_t log pi(y_r,t | h_r)``.

    No ratio and no clipping: one update per rollout, on-policy."""
    loss = -(advantages * row_weights * logps.sequence_sum()).sum()
    return loss, {}


def row_weights(
    lengths: Sequence[int], group_sizes: Sequence[int], num_groups: int, mode: str, max_tokens: int
) -> list[float]:
    """Each completion's weight in a mini-batch loss of ``num_groups`` groups.

    Every group (a node's K completions of one prompt) counts equally: a row of a group of K
    weighs ``1 / (K * num_groups)``. ``mode`` then spreads it over the row's tokens: "none"
    keeps sequence sums, "token_mean" divides by the row's own length, "constant" by
    ``max_tokens`` (Dr. GRPO)."""
    out = []
    for length, k in zip(lengths, group_sizes):
        w = 1.0 / (k * num_groups)
        if mode == "token_mean":
            w /= max(1, length)
        elif mode == "constant":
            w /= max_tokens
        out.append(w)
    return out


def as_tensor(values: Sequence[float], device) -> torch.Tensor:
    """``values`` as a float32 tensor on ``device`` (the dtype the losses accumulate in)."""
    return torch.tensor(list(values), dtype=torch.float32, device=device)
