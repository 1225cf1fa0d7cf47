"""The built-in policy losses, each one registered function (the contract is in
:mod:`comlrl.core.algos`). Every family that trains a policy picks its loss from the registry by
``policy_loss``: the REINFORCE family, the actor-critic actors and MARLHF's RL phase, so a loss
registered once (these or a third party's) trains all of them.

A family passes ``advantages`` and ``row_weights`` so that ``sum_r w_r * A_r * (row r's token
terms)`` is its loss: the REINFORCE family's rows weigh by ``loss_aggregation``, the
actor-critic family folds its aggregation into the advantages and weighs every row 1.
"""

from __future__ import annotations

from typing import Any

from comlrl.core.algos import register_policy_loss
from comlrl.core.algos.ratio import (
    SEQUENCE_LOG_RATIO_MAX,
    clip_range,
    clipped_surrogate,
    dual_clip,
    token_ratio_loss,
)


@register_policy_loss("reinforce")
def reinforce_loss(logps, old_logps, advantages, row_weights, config: Any):
    """REINFORCE with a baseline: ``L = -sum_r w_r * A_r * sum_t log pi(y_r,t | h_r)``.

    No ratio and no clipping: one update per rollout, on-policy."""
    loss = -(advantages * row_weights * logps.sequence_sum()).sum()
    return loss, {}


@register_policy_loss("ppo", needs_old_logps=True)
def ppo_loss(logps, old_logps, advantages, row_weights, config: Any):
    """Token-level clipped ratio (PPO; clip-higher with ``epsilon_high``): ``rho_t =
    pi(y_t) / pi_old(y_t)`` per token against the log-probs taken at rollout.

    At the rollout policy (the first of ``num_iterations`` passes) every ``rho_t`` is 1 and the
    gradient is the ``reinforce`` loss's; the loss value is the surrogate's."""
    return token_ratio_loss(logps, old_logps, advantages, row_weights, config)


@register_policy_loss("gspo", needs_old_logps=True)
def gspo_loss(logps, old_logps, advantages, row_weights, config: Any):
    """GSPO: one sequence-level ratio per completion, ``s_r = exp(mean_t log(pi/pi_old))``
    (its log clamped at ``SEQUENCE_LOG_RATIO_MAX``), clipped and dual-clipped as in PPO and
    shared by the completion's tokens. The config makes GSPO's rows weigh per sequence
    (``loss_aggregation="sequence_mean"``), so each completion's term is its own clipped
    surrogate whatever its length. At the rollout policy its gradient is the ``reinforce``
    loss's."""
    mask = logps.mask
    token_log_ratio = (logps.values - old_logps) * mask
    seq = token_log_ratio.sum(-1) / mask.sum(-1).clamp(min=1.0)
    seq = seq.clamp(max=SEQUENCE_LOG_RATIO_MAX)
    log_ratio = seq.unsqueeze(-1).expand_as(mask) * mask
    low, high = clip_range(config)
    return clipped_surrogate(
        log_ratio,
        mask,
        advantages,
        row_weights,
        low,
        high,
        token_log_ratio=token_log_ratio,
        clip_ratio_c=dual_clip(config),
    )
