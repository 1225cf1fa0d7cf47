"""Critic arguments and placement: ``critic_model`` / ``critics`` to one source per critic
(checked without loading anything), and where and how critics are built."""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

import torch

from comlrl.core.models import is_model_name
from comlrl.core.placement.devices import resolve_devices


def resolve_critic_sources(critic_model: Any, critics: Any, count: int, family: str) -> list[Any]:
    """One source per critic (``count`` of them).

    ``critic_model`` is a name loaded once per critic (a model object only when one critic is
    wanted); ``critics`` is a list with exactly ``count`` names, directories or objects. Both may
    be given only when ``critics`` repeats the ``critic_model`` name.
    """
    if critics is not None:
        if is_model_name(critics) or not isinstance(critics, Sequence):
            raise ValueError(
                f"critics must be a list of model names, directories or model objects, "
                f"got {type(critics).__name__}."
            )
        if len(critics) != count:
            what = "one centralized critic" if count == 1 else "one critic per agent"
            raise ValueError(
                f"critics length ({len(critics)}) must match {count}: {family} uses {what}."
            )
        if any(c is None for c in critics):
            raise ValueError("critics entries must be non-null.")
        if critic_model is not None:
            names = {os.fspath(c) for c in critics if is_model_name(c)}
            if (
                len(names) != 1
                or not all(is_model_name(c) for c in critics)
                or names != {os.fspath(critic_model) if is_model_name(critic_model) else None}
            ):
                raise ValueError(
                    "critic_model and critics conflict: pass critic_model for identical critics, "
                    "or critics for a list, not both."
                )
        return list(critics)
    if critic_model is None:
        raise ValueError(f"{family}: critics must be provided (critic_model or critics).")
    if not is_model_name(critic_model) and count > 1:
        raise ValueError(
            "critic_model should be a model name or directory to build one critic per agent; to "
            f"share one critic object pass critics=[critic] * {count}."
        )
    return [critic_model] * count


def critic_devices(args: Any, agent_devices: Sequence, count: int) -> list[torch.device]:
    """Where ``count`` critics go: ``critic_devices`` in mp mode (default: the agents' devices);
    otherwise the one device every model shares."""
    if args.parallel_training == "mp":
        if args.critic_devices is None:
            return [agent_devices[i % len(agent_devices)] for i in range(count)]
        return resolve_devices(args.critic_devices, count, "critic_devices")
    shared = agent_devices[0]
    if args.critic_devices is not None:
        asked = {str(d) for d in resolve_devices(args.critic_devices, count, "critic_devices")}
        if asked != {str(shared)}:
            raise ValueError(
                f"critic_devices {args.critic_devices!r}: parallel_training='none' keeps every "
                f"model on {shared}; set parallel_training='mp' to place critics elsewhere."
            )
    return [shared] * count


def check_head_devices(args: Any, agent_devices: Sequence) -> None:
    """With value heads on the actors, ``critic_devices`` may only repeat the actors' own
    devices (1.4.3 configs name them, e.g. ``"cpu"``); any other device is a conflict."""
    if args.critic_devices is None:
        return
    asked = resolve_devices(args.critic_devices, len(agent_devices), "critic_devices")
    for i, (want, have) in enumerate(zip(asked, agent_devices)):
        if not _same_device(want, have):
            raise ValueError(
                f"critic_devices {args.critic_devices!r}: with use_separate_critic=False agent "
                f"{i}'s value head lives on its actor's device ({have}), not {want}; remove "
                "critic_devices, name the actors' devices, or set use_separate_critic=True."
            )


def check_critic_vocab(backbone, tokenizer, label: str, model_config: dict) -> None:
    """A critic reads its agent's token ids, so its embedding table must cover them (resized
    when ``model_config`` adds ``special_tokens``)."""
    rows = backbone.get_input_embeddings().weight.shape[0]
    if not hasattr(tokenizer, "__len__"):
        # A tokenizer-like object without a size (1.4.3 accepted any object with pad/EOS
        # ids) cannot be checked here; the embedding lookup still fails on an id too large.
        return
    if len(tokenizer) <= rows:
        return
    if model_config.get("special_tokens"):
        backbone.resize_token_embeddings(len(tokenizer))
        return
    raise ValueError(
        f"{label} has {rows} token embeddings but reads ids from a tokenizer of "
        f"{len(tokenizer)} tokens; use a critic from the agent's model family."
    )


@contextmanager
def seeded_init(seed: int | None, salt: int):
    """Initialise new heads from ``seed`` (when set) without touching the global RNG, so two
    runs with one seed start from the same critics."""
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed((seed * 7919 + salt) % (2**63))
        yield


def critic_model_config(model_config: dict) -> dict:
    """``model_config`` for loading critics: ``critic_model_kwargs`` replace ``model_kwargs``."""
    cfg = dict(model_config)
    cfg["model_kwargs"] = dict(cfg.get("critic_model_kwargs") or {})
    return cfg


def critic_head_dim(args: Any, model_config: dict) -> int | None:
    """The critic head's hidden dim from the config, or (reference spelling) model_config."""
    from_config = args.critic_value_head_hidden_dim
    from_model_config = model_config.get("critic_value_head_hidden_dim")
    if from_config is not None and from_model_config is not None:
        if from_config != from_model_config:
            raise ValueError(
                "critic_value_head_hidden_dim is set in both args and model_config with "
                f"different values ({from_config} vs {from_model_config}); set it once."
            )
    return from_config if from_config is not None else from_model_config


def _same_device(a: torch.device, b: torch.device) -> bool:
    """``cuda`` and ``cuda:0`` name the same device when the current device is 0."""
    if a.type != b.type:
        return False
    if a.index == b.index or a.type == "cpu":
        return True
    current = torch.cuda.current_device() if a.type == "cuda" and torch.cuda.is_available() else 0
    return (a.index if a.index is not None else current) == (
        b.index if b.index is not None else current
    )
