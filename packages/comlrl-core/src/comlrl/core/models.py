"""Loading training targets: agents (and later critics, reward and reference models).

A source is a hub id, a local directory, or an already built model object. One object passed
for several agents is parameter sharing: the agents share weights and gradients while each keeps
its own optimizer.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch


def _is_name(value: Any) -> bool:
    return isinstance(value, (str, bytes)) or hasattr(value, "__fspath__")


def resolve_model_sources(agent_model: Any, agents: Any, num_agents: int | None) -> list[Any]:
    """Return one source per agent from the homogeneous/heterogeneous arguments.

    ``agent_model`` is a name loaded once per agent; ``agents`` is a list of names and/or model
    objects. Both may be given only when ``agents`` repeats ``agent_model``.
    """
    if agent_model is None and agents is None:
        raise ValueError("Either agent_model or agents must be provided.")
    if agents is not None:
        if _is_name(agents) or not isinstance(agents, Sequence) or len(agents) == 0:
            raise ValueError(
                "agents must be a non-empty list of model names, directories or model objects."
            )
        if any(a is None for a in agents):
            raise ValueError("agents entries must be non-null.")
        if num_agents is not None and agent_model is not None and len(agents) != num_agents:
            raise ValueError(f"agents length ({len(agents)}) must match num_agents ({num_agents}).")
        if agent_model is not None:
            if not all(_is_name(a) and str(a) == str(agent_model) for a in agents):
                raise ValueError(
                    "agent_model and agents conflict: pass agent_model for identical agents, "
                    "or agents for a heterogeneous list, not both."
                )
        return list(agents)
    if not _is_name(agent_model):
        if num_agents not in (None, 1):
            raise ValueError(
                "agent_model should be a string to create homogeneous agents; to share one model "
                "object across agents pass agents=[model] * num_agents."
            )
        return [agent_model]
    count = 2 if num_agents is None else num_agents
    if count < 1:
        raise ValueError(f"num_agents must be >= 1, got {count}.")
    return [agent_model] * count


def infer_model_name(source: Any) -> str:
    """A readable name for a source: the string itself or the model's ``_name_or_path``."""
    if _is_name(source):
        return str(source)
    base = getattr(source, "base_model", None)
    for obj in (base, source):
        config = getattr(obj, "config", None) if obj is not None else None
        if config is not None:
            name = getattr(config, "_name_or_path", "") or getattr(config, "model_type", "")
            if name:
                return str(name)
    return type(source).__name__


def model_load_kwargs(model_config: dict | None) -> dict:
    """``from_pretrained`` keyword arguments from a ``model_config`` dict."""
    cfg = dict(model_config or {})
    kwargs: dict[str, Any] = dict(cfg.get("model_kwargs") or {})
    dtype = cfg.get("dtype", cfg.get("torch_dtype"))
    if dtype is not None and dtype != "auto":
        kwargs["dtype"] = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    elif dtype == "auto":
        kwargs["dtype"] = "auto"
    if "attn_implementation" in cfg:
        kwargs["attn_implementation"] = cfg["attn_implementation"]
    # Remote code runs arbitrary Python from the hub: only when the user says so.
    kwargs["trust_remote_code"] = bool(cfg.get("trust_remote_code", False))
    return kwargs


def load_causal_lm(source: str, model_config: dict | None = None):
    """Load a causal LM from a hub id or local directory."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(source), **model_load_kwargs(model_config))


def load_agents(sources: Sequence[Any], model_config: dict | None = None) -> list:
    """Materialise every source. Repeated names load once and are deep-copied (no shared
    weights); a repeated object stays shared (parameter sharing)."""
    loaded: dict[str, Any] = {}
    models = []
    for src in sources:
        if _is_name(src):
            key = str(src)
            if key in loaded:
                models.append(copy.deepcopy(loaded[key]))
            else:
                loaded[key] = load_causal_lm(key, model_config)
                models.append(loaded[key])
        else:
            models.append(src)
    return models


def ensure_pad_token(tokenizer) -> None:
    """Use EOS as the pad token when the tokenizer has none; fail if neither exists."""
    if getattr(tokenizer, "pad_token_id", None) is None:
        if getattr(tokenizer, "eos_token", None) is not None:
            tokenizer.pad_token = tokenizer.eos_token
    if getattr(tokenizer, "pad_token_id", None) is None:
        raise ValueError("Tokenizer must expose pad_token_id (or an eos_token to pad with).")


def resolve_tokenizers(tokenizer: Any, sources: Sequence[Any], model_config: dict | None = None):
    """One tokenizer per agent: a given list, one shared tokenizer, or loaded from names."""
    count = len(sources)
    if tokenizer is None:
        if not all(_is_name(s) for s in sources):
            raise ValueError("Tokenizer(s) must be provided when agents are model objects.")
        from transformers import AutoTokenizer

        trust = bool((model_config or {}).get("trust_remote_code", False))
        cache: dict[str, Any] = {}
        toks = []
        for s in sources:
            key = str(s)
            if key not in cache:
                cache[key] = AutoTokenizer.from_pretrained(key, trust_remote_code=trust)
            toks.append(cache[key])
    elif isinstance(tokenizer, (list, tuple)):
        if len(tokenizer) != count:
            raise ValueError(
                f"tokenizers length ({len(tokenizer)}) must match agents ({count}); pass one "
                "tokenizer to share, or one per agent."
            )
        toks = list(tokenizer)
    else:
        toks = [tokenizer] * count
    for tok in toks:
        ensure_pad_token(tok)
    return toks


def add_special_tokens(tokenizers: Sequence[Any], models: Sequence[Any], special_tokens: dict):
    """Add special tokens to each tokenizer and grow the matching embeddings to fit."""
    for tok in {id(t): t for t in tokenizers}.values():
        tok.add_special_tokens(dict(special_tokens))
    seen = set()
    for tok, model in zip(tokenizers, models):
        if id(model) in seen:
            continue
        seen.add(id(model))
        if len(tok) > model.get_input_embeddings().weight.shape[0]:
            model.resize_token_embeddings(len(tok))


def sync_generation_ids(model, tokenizer) -> None:
    """Make ``generate`` stop at this tokenizer's EOS and pad with its pad id."""
    for cfg in (getattr(model, "config", None), getattr(model, "generation_config", None)):
        if cfg is not None:
            cfg.pad_token_id = tokenizer.pad_token_id
            cfg.eos_token_id = tokenizer.eos_token_id


def freeze_model(model):
    """Put ``model`` in eval mode with gradients off (reference and frozen models)."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def unique_models(models: Sequence[Any]) -> list:
    """The distinct model objects, in first-seen order (shared agents count once)."""
    return list({id(m): m for m in models}.values())


def place_agents(
    sources: Sequence[Any], tokenizer: Any, model_config: dict, devices: Sequence[Any]
) -> tuple[list, list]:
    """Load every agent and its tokenizer, add the configured special tokens, move each agent
    to its device and align its generation ids with its tokenizer; returns (agents,
    tokenizers)."""
    agents = load_agents(sources, model_config)
    tokenizers = resolve_tokenizers(tokenizer, sources, model_config)
    if model_config.get("special_tokens"):
        add_special_tokens(tokenizers, agents, model_config["special_tokens"])
    for model, tok, dev in zip(agents, tokenizers, devices):
        model.to(dev)
        sync_generation_ids(model, tok)
    return agents, tokenizers
