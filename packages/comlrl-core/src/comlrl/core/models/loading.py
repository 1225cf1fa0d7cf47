"""Loading training targets: the dtype and keyword arguments of a load, causal LMs from hub ids
or directories, and :func:`build_agents` (every agent and its tokenizer loaded and placed on its
device). One object passed for several agents is parameter sharing: the agents share weights
and gradients while each keeps its own optimizer."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch

from comlrl.core.errors import UserError
from comlrl.core.models.setup import check_device_map
from comlrl.core.models.sources import (
    check_model_source,
    check_model_sources,
    is_model_name,
    unresolved_model,
)
from comlrl.core.models.tokenizers import add_special_tokens, check_vocab_fits, resolve_tokenizers

# Floating dtypes a model can be loaded in (with "auto": the checkpoint's own dtype; without
# any, float32).
DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64", "float", "half", "double")


def resolve_dtype(value: Any, field: str = "model_config.dtype") -> torch.dtype | str | None:
    """``None``, ``"auto"``, a torch floating dtype, or its name (``"bfloat16"``,
    ``"torch.float16"``) → the dtype to load with; anything else is a ValueError naming ``field``."""
    if value is None or (isinstance(value, torch.dtype) and value.is_floating_point):
        return value
    if isinstance(value, str):
        name = value.strip().lower().removeprefix("torch.")
        if name == "auto":
            return "auto"
        if name in DTYPE_NAMES:
            return getattr(torch, name)
    raise ValueError(
        f"{field}: unknown dtype {value!r}; use one of {['auto', *DTYPE_NAMES]} or a torch "
        "floating dtype."
    )


def check_model_config(model_config: dict | None) -> None:
    """Cheap checks of ``model_config`` before anything loads: its dtype names, and no
    ``device_map`` (see :func:`comlrl.core.models.setup.check_device_map`)."""
    cfg = model_config or {}
    for key in ("dtype", "torch_dtype"):
        resolve_dtype(cfg.get(key), f"model_config.{key}")
    check_device_map(cfg)


def shares_parameters(model_config: dict | None) -> bool:
    """``model_config["share_parameters"]``: whether agents of one model name are one model
    object (parameter sharing, as ``agents=[model, model]`` gives in Python); False when unset."""
    value = (model_config or {}).get("share_parameters", False)
    if not isinstance(value, bool):
        raise UserError(
            f"model_config.share_parameters must be true or false, got {value!r}: true makes "
            "agents of one model name share one model object (one set of weights)."
        )
    return value


def check_sharing_with_adapters(model_config: dict | None, peft_config: object) -> None:
    """Refuse ``share_parameters`` together with ``peft_config``: adapters on one base give
    each agent its own adapter, so the agents would not share their trainable weights as
    ``share_parameters`` asks (and no option gives one adapter for every agent)."""
    if peft_config is not None and shares_parameters(model_config):
        raise UserError(
            "model_config.share_parameters=true with peft_config: adapters give each agent its "
            "own adapter on one shared base, not one set of trainable weights for every agent; "
            "drop share_parameters (one adapter per agent) or peft_config (one shared model)."
        )


def model_load_kwargs(model_config: dict | None) -> dict:
    """``from_pretrained`` keyword arguments from a ``model_config`` dict.

    Without a dtype in ``model_config`` (or its ``model_kwargs``) the model loads in float32,
    whatever dtype the checkpoint is stored in: transformers would otherwise load a bf16 hub
    checkpoint in bf16, and training bf16 weights (and AdamW state) rounds small updates away.
    An explicit dtype (``"bfloat16"``, ``"auto"`` for the checkpoint's own) is honoured."""
    cfg = dict(model_config or {})
    check_device_map(cfg)
    kwargs: dict[str, Any] = dict(cfg.get("model_kwargs") or {})
    field = "model_config.dtype" if cfg.get("dtype") is not None else "model_config.torch_dtype"
    dtype = resolve_dtype(cfg.get("dtype", cfg.get("torch_dtype")), field)
    if dtype is not None:
        kwargs["dtype"] = dtype
    elif "dtype" not in kwargs and "torch_dtype" not in kwargs:
        kwargs["dtype"] = torch.float32
    if "attn_implementation" in cfg:
        kwargs["attn_implementation"] = cfg["attn_implementation"]
    # Remote code runs arbitrary Python from the hub: only when the user says so.
    kwargs["trust_remote_code"] = bool(cfg.get("trust_remote_code", False))
    return kwargs


def load_causal_lm(source: str, model_config: dict | None = None, field: str = "model"):
    """Load a causal LM from a hub id or local directory (checked first, see
    :func:`check_model_source`; ``field`` names the argument in its errors)."""
    from transformers import AutoModelForCausalLM

    from comlrl.core.quiet import quiet_hub_progress

    check_model_source(source, field)
    with quiet_hub_progress(), unresolved_model(source, field):
        return AutoModelForCausalLM.from_pretrained(str(source), **model_load_kwargs(model_config))


def load_agents(
    sources: Sequence[Any], model_config: dict | None = None, share_named: bool = False
) -> list:
    """Materialise every source. Repeated names load once and are deep-copied (no shared
    weights); a repeated object stays shared (parameter sharing). Every named source is
    checked before the first one loads. With ``share_named`` a repeated name stays one object
    (agents of one base that get one adapter each on it)."""
    check_model_sources(sources)
    loaded: dict[str, Any] = {}
    models = []
    for src in sources:
        if is_model_name(src):
            key = str(src)
            if key in loaded:
                models.append(loaded[key] if share_named else copy.deepcopy(loaded[key]))
            else:
                loaded[key] = load_causal_lm(key, model_config)
                models.append(loaded[key])
        else:
            models.append(src)
    return models


def freeze_model(model):
    """Put ``model`` in eval mode with gradients off (reference and frozen models)."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def unique_models(models: Sequence[Any]) -> list:
    """The distinct model objects, in first-seen order (shared agents count once)."""
    return list({id(m): m for m in models}.values())


def build_agents(
    sources: Sequence[Any],
    tokenizer: Any,
    model_config: dict,
    devices: Sequence[Any],
    share_named: bool = False,
) -> tuple[list, list]:
    """The agents as a trainer uses them: every agent and its tokenizer loaded, the configured
    special tokens added and each agent moved to its device (as :mod:`comlrl.core.placement`
    planned); returns (agents, tokenizers). The agents' ``config`` and ``generation_config``
    stay as the user gave them: generation passes the tokenizer's pad and EOS ids explicitly.
    ``share_named`` (a ``peft_config`` run on one device) keeps agents of one named base one
    object, which :func:`~comlrl.core.models.setup.prepare_agents` gives one adapter per
    agent."""
    share_named = share_named and len({str(d) for d in devices}) == 1
    agents = load_agents(sources, model_config, share_named)
    tokenizers = resolve_tokenizers(tokenizer, sources, model_config)
    if model_config.get("special_tokens"):
        add_special_tokens(tokenizers, agents, model_config["special_tokens"])
    check_vocab_fits(tokenizers, agents)
    for model, dev in zip(agents, devices):
        model.to(dev)
    return agents, tokenizers
