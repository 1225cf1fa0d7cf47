"""Frozen reference models, and the per-sequence KL to them that reward shaping subtracts (the
KL estimators themselves are core's math: :mod:`comlrl.core.algos.losses`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from comlrl.core.algos.losses import check_estimator, token_kl
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
