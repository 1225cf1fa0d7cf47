"""KL to the reference in the REINFORCE family: where it goes (reward or loss) and the loss term.

KL in the reward (``reference_kl_enabled``) is core's reward transform
(:mod:`comlrl.core.rewards.shaping`): ``reference_kl_coef * KL`` comes off the reward of each
completion before the tree's returns are computed, so a return includes the discounted KL of
the later turns it led to, just as it includes their rewards. KL in the loss (``beta``) adds
``beta * KL`` per token to the loss, aggregated with the policy loss's row weights.
"""

from __future__ import annotations

from typing import Any

import torch

from comlrl.core.models.reference import estimator_for, token_kl


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
