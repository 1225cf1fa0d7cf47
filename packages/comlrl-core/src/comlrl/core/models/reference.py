"""Frozen reference models and the KL estimators to them (reward shaping and loss terms).

Per token, with ``d = log pi_ref - log pi`` (the sample drawn from ``pi``):

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
from typing import TYPE_CHECKING, Any

import torch

from comlrl.core.config.base import KL_ESTIMATORS
from comlrl.core.distributed.sharding import unsharded_copy
from comlrl.core.logprobs import token_logprobs
from comlrl.core.models import freeze_model, load_causal_lm
from comlrl.core.training.precision import precision_like

if TYPE_CHECKING:
    from comlrl.core.trainer import TrainerBase


def build_reference_models(
    agents: Sequence[Any], sources: Sequence[Any], devices, model_config: dict | None = None
) -> list:
    """One frozen reference per agent: reloaded from its name, or a copy of the given object,
    in the precision of the initial policy it stands for (fp32 when the agent's weights are,
    so that under ``bf16=True`` both are scored under the same autocast from the same weights
    and the KL starts at exactly 0).

    Agents that share one object share one reference too; agents that are adapters on one
    shared base get the base with adapters disabled (no copy).
    """
    from comlrl.core.models.adapters import AdapterAgent

    refs: dict[int, Any] = {}
    out = []
    for agent, src, dev in zip(agents, sources, devices):
        if isinstance(agent, AdapterAgent):
            out.append(agent.reference_model())
            continue
        key = id(agent)
        if key not in refs:
            ref = (
                load_causal_lm(src, model_config) if isinstance(src, str) else unsharded_copy(agent)
            )
            refs[key] = freeze_model(precision_like(ref, agent)).to(dev)
        out.append(refs[key])
    return out


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


@torch.no_grad()
def sequence_kl(
    policy,
    reference,
    prompt_ids,
    completion_ids,
    pad_id: int,
    estimator: str = "k1",
    temperature: float = 1.0,
) -> list[float]:
    """Per-sequence KL estimate: ``estimator`` (see the module docs) summed over the completion
    tokens, EOS included, between the policy and the reference both tempered at ``temperature``
    (the sampler's, so the KL is to the distribution the samples came from)."""
    check_estimator(estimator, "estimator")
    was_training = policy.training
    policy.eval()
    try:
        # One padded forward each (the callers size the rows to their budget).
        pol = token_logprobs(
            policy,
            prompt_ids,
            completion_ids,
            pad_id=pad_id,
            layout="padded",
            temperature=temperature,
        )
        ref = token_logprobs(
            reference,
            prompt_ids,
            completion_ids,
            pad_id=pad_id,
            layout="padded",
            temperature=temperature,
        )
    finally:
        policy.train(was_training)
    mask = ref.mask
    kl = token_kl(pol.values.to(ref.values.device) * mask, ref.values * mask, estimator) * mask
    return kl.sum(-1).tolist()


@torch.no_grad()
def reference_token_logps(
    reference,
    prompt_ids,
    completion_ids,
    pad_id: int,
    max_tokens: int | None = None,
    temperature: float = 1.0,
) -> list[list[float]]:
    """The reference's per-token log-probs of each completion at ``temperature`` (for a KL term
    in the loss, against the policy scored at the same temperature)."""
    ref = token_logprobs(
        reference,
        prompt_ids,
        completion_ids,
        pad_id=pad_id,
        max_tokens=max_tokens,
        temperature=temperature,
    )
    return [v[: len(c)] for v, c in zip(ref.values.tolist(), completion_ids)]


def reference_models_for(trainer: TrainerBase) -> list:
    """The frozen references of ``trainer``'s agents when its config uses a reference KL (in
    the reward or, where the family offers it, the loss; on ``reference_devices`` when set, else next to the agents); an empty list otherwise."""
    a = trainer.args
    if not a._uses_reference():
        return []
    from comlrl.core.placement.devices import plan_devices

    devices = (
        plan_devices("mp", a.reference_devices, trainer.num_agents, "reference_devices")
        if a.reference_devices is not None
        else trainer.agent_devices
    )
    return build_reference_models(trainer.agents, trainer.sources, devices, trainer.model_config)
