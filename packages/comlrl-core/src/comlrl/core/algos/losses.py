"""Core's built-in policy-gradient math in one place: the registered policy losses
(``reinforce``, ``ppo``, ``gspo``), the clipped importance ratio they share, and the one
z-score every family normalizes advantages with.

Every family that trains a policy picks its loss from the registry by ``policy_loss`` (the
contract is in :mod:`comlrl.core.algos.registry`): the REINFORCE family, the actor-critic actors
and MARLHF's RL phase, so a loss registered once (these or a third party's) trains all of them.
A family passes ``advantages`` and ``row_weights`` so that ``sum_r w_r * A_r * (row r's token
terms)`` is its loss: the REINFORCE family's rows weigh by ``loss_aggregation``, the
actor-critic family folds its aggregation into the advantages and weighs every row 1.

The clipped ratio: a family keeps the log-probs its rollout policy gave each completion token
(no gradient) and, in each of several updates per rollout, weighs its advantages by the ratio of
the current policy to that rollout policy, clipped so that one rollout cannot move the policy
far. Two guards keep one stale or degenerate row from dominating an update (both as in verl):

- the dual clip (``clip_ratio_c``, c > 1): for a negative advantage the per-token loss is at
  most ``-c·A``. PPO's clip bounds the ratio only on the side that improves the objective, so a
  ratio of 10 with ``A = -1`` would otherwise cost 10 and push with a gradient of 10;
- the log-ratio is clamped before it is exponentiated: a token's to ``±LOG_RATIO_BOUND`` (20)
  and a GSPO sequence log-ratio to at most ``SEQUENCE_LOG_RATIO_MAX`` (10), so the surrogate
  stays finite (an infinite loss would drop the whole step).

The KL to the reference, per token, with ``d = log pi_ref - log pi`` (the sample drawn from
``pi``):

- ``k1 = -d``: unbiased for KL(pi || ref); the estimator for the *reward* (its score-function
  gradient is the KL's gradient, as TRL, verl and OpenRLHF use it);
- ``k2 = d^2 / 2``: low variance; in the *loss*, its gradient is the KL's gradient on-policy;
- ``k3 = exp(d) - d - 1 >= 0``: unbiased and low variance (GRPO's loss term); as a reward its
  score-function gradient is biased (CoMLRL 1.4.3 used it there). It grows exponentially in
  ``d``: one sampled token the policy finds far less likely than the reference does (log-probs
  -12 against -0.5) gives 9.9e4, and after gradient clipping that token alone sets the step's
  direction. So, as verl's ``low_var_kl``, ``d`` is clamped to [-20, 20] and k3 to [0, 10]
  (:data:`K3_CLAMP`); a clamped token gets no gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from comlrl.core.algos.registry import register_policy_loss
from comlrl.core.config.base import KL_ESTIMATORS
from comlrl.core.logprobs import TokenLogprobs

# ------------------------------------------------------------------ z-score
STD_FLOOR = 1e-6


def zscore(values: torch.Tensor, moments: tuple[float, float, int] | None = None) -> torch.Tensor:
    """``(x - mean) / max(std, 1e-6)`` with the population std.

    ``moments`` (mean, population std, count) replace the values' own statistics: in a
    multi-process run they are pooled over every rank's share. With a count of one there is
    no spread to divide by, and the values are returned unchanged.
    """
    if moments is not None:
        mean, std, count = moments
        if count <= 1:
            return values.clone()
        return (values - mean) / max(std, STD_FLOOR)
    if values.numel() <= 1:
        return values.clone()
    return (values - values.mean()) / values.std(unbiased=False).clamp(min=STD_FLOOR)


# ------------------------------------------------------------------ the clipped ratio
# Bounds on the log-ratio before ``exp`` (verl's values): exp(20) and exp(10) are far outside any
# clip range, so only numerically broken rows are touched.
LOG_RATIO_BOUND = 20.0
SEQUENCE_LOG_RATIO_MAX = 10.0
# The dual clip's default c (verl's ``clip_ratio_c``); configs without the field use it.
DEFAULT_CLIP_RATIO_C = 3.0


def clipped_surrogate(
    log_ratio: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    row_weights: torch.Tensor,
    eps_low: float,
    eps_high: float,
    token_log_ratio: torch.Tensor | None = None,
    clip_ratio_c: float | None = DEFAULT_CLIP_RATIO_C,
):
    """PPO's clipped surrogate ``-sum_r w_r sum_t min(rho A_r, clip(rho, 1-eps_low, 1+eps_high)
    A_r)`` with ``rho = exp(log_ratio)`` per token (``[rows, tokens]``), dual-clipped: a
    token with ``A_r < 0`` costs at most ``-clip_ratio_c·A_r`` (None: no dual clip). The
    log-ratio is clamped to ``±LOG_RATIO_BOUND`` first.

    Metrics: ``clip_fraction`` (share of tokens whose clipped branch, PPO's or the dual clip,
    is the active one) and ``approx_kl`` (mean ``rho - 1 - log rho`` over tokens of
    ``token_log_ratio``, default ``log_ratio``: the k3 estimate of KL(old || new) from tokens
    the old policy sampled)."""
    log_ratio = log_ratio.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    ratio = torch.exp(log_ratio)
    adv = advantages.unsqueeze(-1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    if clip_ratio_c is not None:
        per_token = torch.where(adv < 0, torch.minimum(per_token, -clip_ratio_c * adv), per_token)
    per_token = per_token * mask
    loss = (row_weights * per_token.sum(-1)).sum()
    with torch.no_grad():
        tokens = mask.sum().clamp(min=1.0)
        active = ((ratio < 1.0 - eps_low) & (adv < 0)) | ((ratio > 1.0 + eps_high) & (adv > 0))
        if clip_ratio_c is not None:
            active = active | ((ratio > clip_ratio_c) & (adv < 0))
        lr = log_ratio if token_log_ratio is None else token_log_ratio
        lr = lr.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
        approx_kl = ((torch.exp(lr) - 1.0 - lr) * mask).sum() / tokens
        metrics = {
            "clip_fraction": float((active.float() * mask).sum() / tokens),
            "approx_kl": float(approx_kl),
        }
    return loss, metrics


def clip_range(config: Any) -> tuple[float, float]:
    """``(epsilon, epsilon_high)`` of the config; ``epsilon_high`` None is ``epsilon``."""
    low = float(config.epsilon)
    high = config.epsilon_high
    return low, low if high is None else float(high)


def dual_clip(config: Any) -> float | None:
    """The config's ``clip_ratio_c`` (the dual clip's c; None turns it off), or
    ``DEFAULT_CLIP_RATIO_C`` for a config without the field."""
    c = getattr(config, "clip_ratio_c", DEFAULT_CLIP_RATIO_C)
    return None if c is None else float(c)


def token_ratio_loss(
    logps: TokenLogprobs,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    row_weights: torch.Tensor,
    config: Any,
):
    """The token-level clipped surrogate of ``logps`` against the rollout's ``old_logps``
    (``[rows, tokens]``, laid out as ``logps.values``) with the config's clip range.

    At the rollout policy every ratio is 1, so its gradient is that of
    ``-sum_r w_r A_r sum_t log pi(y_r,t)`` (the on-policy loss); its value is the surrogate's,
    ``-sum_r w_r A_r L_r`` for rows of ``L_r`` tokens."""
    mask = logps.mask
    log_ratio = (logps.values - old_logps) * mask
    low, high = clip_range(config)
    return clipped_surrogate(
        log_ratio, mask, advantages, row_weights, low, high, clip_ratio_c=dual_clip(config)
    )


# ------------------------------------------------------------------ KL to the reference
# verl's bounds for k3: the log-ratio d to [-D, D], k3 itself to at most K3 (k3 >= 0 anyway).
K3_LOG_RATIO_CLAMP = 20.0
K3_CLAMP = 10.0

# Where the KL goes when ``reference_kl_estimator`` is None.
DEFAULT_ESTIMATORS = {"reward": "k1", "loss": "k3"}


def check_estimator(name: str, field: str = "reference_kl_estimator") -> str:
    """``name`` if it is a known estimator; a ValueError naming ``field`` otherwise."""
    if name not in KL_ESTIMATORS:
        raise ValueError(f"{field} must be one of {', '.join(KL_ESTIMATORS)}; got {name!r}.")
    return name


def token_kl(logps: torch.Tensor, ref_logps: torch.Tensor, estimator: str) -> torch.Tensor:
    """The per-token KL estimate ``estimator`` (k1, k2 or k3) of samples from the policy whose
    log-probs are ``logps``, against the reference's ``ref_logps`` (same shape); k3 clamped as
    verl clamps it (see the module docs)."""
    d = ref_logps - logps
    kind = check_estimator(estimator, "estimator")
    if kind == "k1":
        return -d
    if kind == "k2":
        return 0.5 * d * d
    d = d.clamp(-K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP)
    return (torch.exp(d) - d - 1.0).clamp(max=K3_CLAMP)


def estimator_for(args: Any, where: str) -> str:
    """The estimator ``args`` asks for in the ``where`` ("reward" or "loss") KL term:
    ``reference_kl_estimator`` when set, else k1 in the reward and k3 in the loss."""
    chosen = getattr(args, "reference_kl_estimator", None)
    return chosen if chosen is not None else DEFAULT_ESTIMATORS[where]


def kl_penalty(
    logps: TokenLogprobs,
    ref_logps: torch.Tensor,
    row_weights: torch.Tensor,
    coef: float,
    estimator: str,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The KL-to-reference loss term ``coef * sum_r w_r * sum_t KL_t`` over the rows of
    ``logps`` (with grad), ``ref_logps`` the reference's per-token log-probs in the same layout,
    aggregated with the policy loss's row weights. Returns the term and the mean per-token KL
    estimate (``kl``)."""
    mask = logps.mask
    kl = token_kl(logps.values * mask, ref_logps * mask, estimator) * mask
    term = coef * (row_weights * kl.sum(-1)).sum()
    tokens = mask.sum().clamp(min=1.0)
    return term, {"kl": float(kl.detach().sum() / tokens)}


def padded_rows(rows: Sequence[Sequence[float]], width: int, device) -> torch.Tensor:
    """Per-token values of each row, left-aligned and zero-padded to ``width`` columns (the
    layout of :class:`~comlrl.core.logprobs.TokenLogprobs`)."""
    out = torch.zeros((len(rows), width), dtype=torch.float32, device=device)
    for r, values in enumerate(rows):
        out[r, : len(values)] = torch.tensor(list(values)[:width], dtype=torch.float32)
    return out


# ------------------------------------------------------------------ the registered losses
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
