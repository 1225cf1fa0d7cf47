"""Frozen reference models and the per-sequence KL used for reward shaping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from comlrl.core.logprobs import completion_logprobs
from comlrl.core.models import freeze_model, load_causal_lm
from comlrl.core.sharding import unsharded_copy


def build_reference_models(
    agents: Sequence[Any], sources: Sequence[Any], devices, model_config: dict | None = None
) -> list:
    """One frozen reference per agent: reloaded from its name, or a copy of the given object.

    Agents that share one object share one reference too.
    """
    refs: dict[int, Any] = {}
    out = []
    for agent, src, dev in zip(agents, sources, devices):
        key = id(agent)
        if key not in refs:
            ref = (
                load_causal_lm(src, model_config) if isinstance(src, str) else unsharded_copy(agent)
            )
            refs[key] = freeze_model(ref).to(dev)
        out.append(refs[key])
    return out


@torch.no_grad()
def sequence_kl(policy, reference, prompt_ids, completion_ids, pad_id: int) -> list[float]:
    """Per-sequence KL estimate (k3, summed over completion tokens, EOS included).

    With ``d = log p_ref - log p_policy`` per token, ``k3 = exp(d) - d - 1 >= 0``.
    """
    was_training = policy.training
    policy.eval()
    try:
        pol = completion_logprobs(policy, prompt_ids, completion_ids, pad_id)
        ref = completion_logprobs(reference, prompt_ids, completion_ids, pad_id)
    finally:
        policy.train(was_training)
    d = (ref.values - pol.values.to(ref.values.device)) * ref.mask
    k3 = (torch.exp(d) - d - 1.0) * ref.mask
    return k3.sum(-1).tolist()


def reference_models_for(trainer: Any) -> list:
    """The frozen references of ``trainer``'s agents when its config enables the reference KL
    (on ``reference_devices`` when set, else next to the agents); an empty list otherwise."""
    a = trainer.args
    if not a.reference_kl_enabled:
        return []
    from comlrl.core.devices import plan_devices

    devices = (
        plan_devices("mp", a.reference_devices, trainer.num_agents, "reference_devices")
        if a.reference_devices is not None
        else trainer.agent_devices
    )
    return build_reference_models(trainer.agents, trainer.sources, devices, trainer.model_config)
