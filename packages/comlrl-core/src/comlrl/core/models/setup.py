"""What the config does to the agents once they are loaded: LoRA adapters and gradient
checkpointing; and the ``device_map`` loading option, which the trainer cannot honour.

``peft_config`` (a dict as YAML writes it, or a ``peft`` config object such as
``peft.LoraConfig``) wraps every distinct agent in a PEFT model, so only the adapter trains.
``gradient_checkpointing`` recomputes activations in the backward pass instead of keeping them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from comlrl.core.errors import require_packages
from comlrl.core.training.precision import master_weights


def check_device_map(model_config: Mapping | None) -> None:
    """Refuse ``device_map`` in ``model_config`` (or its ``model_kwargs``).

    Loading with a device map spreads one model's layers over several devices, but the trainer
    then places each agent as a whole on its own device, which would undo it; so the option
    is refused rather than silently ignored.
    """
    cfg = model_config or {}
    kwargs = cfg.get("model_kwargs") or {}
    for field, source in (("model_config.device_map", cfg), ("model_kwargs.device_map", kwargs)):
        if isinstance(source, Mapping) and source.get("device_map") is not None:
            raise ValueError(
                f"{field} is not supported: each agent is placed whole on one device. Put "
                "agents on devices with agent_devices (one per agent, with "
                "parallel_training='mp'), or run several processes with torchrun or "
                "accelerate launch (distributed_mode ddp/fsdp) to spread the work; remove "
                "device_map."
            )


def _plain(value: Any) -> Any:
    """Peft config values as plain data (sets sorted, enums by value), so that the config
    saves as YAML and fingerprints the same in every process."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def check_peft_config(name: str, value: Any) -> dict | None:
    """``None``, a dict of ``peft`` config fields, or a ``peft`` config object (stored as its
    dict). Without the ``peft`` package any value but None is an error naming the extra."""
    if value is None:
        return None
    require_packages([("peft", name)])
    if hasattr(value, "peft_type") and callable(getattr(value, "to_dict", None)):
        value = value.to_dict()
    if not isinstance(value, Mapping):
        raise ValueError(
            f"{name} must be a mapping of peft config fields (e.g. {{r: 16, lora_alpha: 32, "
            f"target_modules: [q_proj, v_proj]}}) or a peft config object such as "
            f"peft.LoraConfig, got {type(value).__name__}."
        )
    plain = _plain(value)
    # The agents are causal LMs; LoRA is what a mapping without a type asks for.
    for key, default in (("peft_type", "LORA"), ("task_type", "CAUSAL_LM")):
        if plain.get(key) is None:
            plain[key] = default
    build_peft_config(plain, name)  # an unknown field or type fails now, before loading
    return plain


def build_peft_config(config: Mapping, name: str = "peft_config"):
    """The ``peft`` config object for a checked ``peft_config`` dict."""
    from peft import get_peft_config

    try:
        return get_peft_config(dict(config))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{name}: peft cannot build a config from {dict(config)}: {exc}") from exc


def _is_peft_model(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "base_model")


def wrap_with_peft(agents: list, peft_config: Mapping) -> list:
    """Each distinct agent wrapped in a PEFT model (shared agents stay shared)."""
    from peft import get_peft_model

    wrapped: dict[int, Any] = {}
    out = []
    for i, model in enumerate(agents):
        if id(model) not in wrapped:
            if _is_peft_model(model):
                raise ValueError(
                    f"peft_config is set, but agent {i} is already a PEFT model; give the base "
                    "model with peft_config, or the PEFT model without it."
                )
            wrapped[id(model)] = get_peft_model(model, build_peft_config(peft_config))
        out.append(wrapped[id(model)])
    return out


def share_or_wrap(agents: list, peft_config: Mapping, seed: int | None = None) -> list:
    """Agents that are one base object get one :class:`~comlrl.core.models.adapters.SharedBase` (one
    frozen base, one adapter per agent, named ``agent_<i>``); every other agent is wrapped in
    its own PEFT model. The shared adapters' initial weights are drawn from ``seed`` (0 when
    None) without touching the global RNG, so two runs of one config start equal (exact
    resume compares them)."""
    import torch

    from comlrl.core.models.adapters import SharedBase, shared_base_groups

    out = list(agents)
    for group in shared_base_groups(agents):
        if len(group) == 1:
            out[group[0]] = wrap_with_peft([agents[group[0]]], peft_config)[0]
            continue
        base = agents[group[0]]
        check_shared_base_init(peft_config)
        if _is_peft_model(base):
            raise ValueError(
                f"peft_config is set, but agent {group[0]} is already a PEFT model; give the "
                "base model with peft_config, or the PEFT model without it."
            )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0 if seed is None else seed)
            shared = SharedBase(base, peft_config, [f"agent_{i}" for i in group])
        for i, view in zip(group, shared.agents()):
            out[i] = view
    return out


def check_shared_base_init(peft_config: Any) -> None:
    """Refuse a LoRA initialisation that is not the zero update when several agents share one
    base: residual ones (PiSSA, OLoRA, CorDA, LoftQ, EVA...) rewrite the shared base weight
    once per adapter, so no agent would start at the loaded model, nor would the KL reference
    (the base with adapters off) be it; ``False`` (random B) starts every agent away from it."""
    config = peft_config.to_dict() if hasattr(peft_config, "to_dict") else dict(peft_config)
    init = config.get("init_lora_weights", True)
    # Only True and "gaussian" start the adapter as the zero update (B = 0), the base as loaded.
    zero_update = init is True or init == "gaussian"
    if str(config.get("peft_type", "LORA")).upper().endswith("LORA") and not zero_update:
        raise ValueError(
            f"peft_config.init_lora_weights={init!r} cannot be used with adapters on one shared "
            "base (agents of one model with peft_config): it changes the shared base weights "
            "once per agent, so neither the agents nor the KL reference start at the loaded "
            "model; use True or 'gaussian', or give each agent its own base model object."
        )


def enable_gradient_checkpointing(agents: list) -> None:
    """Turn on gradient checkpointing for every distinct agent.

    The non-reentrant variant is used: it needs no input that requires grad, so it works with
    frozen embeddings (LoRA). Adapters on one shared base recompute each layer with the
    adapter its forward ran with (see
    :meth:`~comlrl.core.models.adapters.SharedBase.checkpoint_contexts`). The model's own KV
    cache is turned off for its forward passes, which transformers would otherwise do with a
    warning at every training step; generation asks for the cache explicitly and is unaffected.
    """
    from comlrl.core.models.adapters import shared_base_of

    # An adapter view runs its shared base model: that model is the one to configure, once,
    # with a recomputation that re-activates the adapter each layer's forward ran with.
    owners: dict[int, tuple[Any, dict]] = {}
    for m in agents:
        shared = shared_base_of(m)
        model = shared.model if shared is not None else m
        kwargs: dict[str, Any] = {"use_reentrant": False}
        if shared is not None:
            kwargs["context_fn"] = shared.checkpoint_contexts
        owners.setdefault(id(model), (model, kwargs))
    for model, kwargs in owners.values():
        # transformers 5 renamed the method (the old name warns); older releases have only it.
        enable = getattr(model, "activation_checkpointing_enable", None)
        if callable(enable):
            enable(activation_checkpointing_kwargs=kwargs)
        elif callable(getattr(model, "gradient_checkpointing_enable", None)):
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        else:
            raise ValueError(
                f"gradient_checkpointing is set, but the agent {type(model).__name__} has no "
                "gradient_checkpointing_enable(); use a transformers model or turn it off."
            )
        config = getattr(model, "config", None)
        if config is not None and hasattr(config, "use_cache"):
            config.use_cache = False


def prepare_agents(agents: list, args: Any) -> list:
    """The agents after the config's ``bf16`` (fp32 master weights), ``peft_config`` and
    ``gradient_checkpointing``."""
    if args.bf16:
        agents = [master_weights(m) for m in agents]
    peft_config = getattr(args, "peft_config", None)
    if peft_config is not None:
        agents = share_or_wrap(agents, peft_config, getattr(args, "seed", None))
    if getattr(args, "gradient_checkpointing", False):
        enable_gradient_checkpointing(agents)
    return agents
