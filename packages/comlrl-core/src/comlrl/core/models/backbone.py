"""The transformer body inside a model and the width of its hidden states.

Critics, value heads and reward models read hidden states, not vocabulary logits, so each of
them needs the body a causal LM wraps and that body's hidden size. One helper for every family
keeps the GPT-2 / Llama / T5 spellings of those in one place.
"""

from __future__ import annotations

from typing import Any

from torch import nn

_HIDDEN_SIZE_KEYS = ("hidden_size", "n_embd", "d_model")


def backbone_of(model: Any) -> Any:
    """The transformer body of a causal LM (its ``base_model``); a body is returned as is.

    A PEFT model's body is the one inside the model it wraps (its adapter layers included),
    and an agent that shares one base with others (``hidden_body()``) gives a body that runs
    under its own adapter; a PEFT model's own ``base_model`` is the whole LM, head and all.
    """
    hidden_body = getattr(type(model), "hidden_body", None)
    if callable(hidden_body):
        return model.hidden_body()
    get_base_model = getattr(type(model), "get_base_model", None)
    if callable(get_base_model):
        return backbone_of(model.get_base_model())
    base = getattr(model, "base_model", None)
    return base if isinstance(base, nn.Module) else model


def hidden_size_of(model: Any, role: str = "model") -> int:
    """Width of ``model``'s hidden states (``hidden_size``, GPT-2's ``n_embd`` or ``d_model``).

    ``model`` may be a model or its config; ``role`` names it in the error ("critic",
    "reward model backbone", ...).
    """
    config = getattr(model, "config", model)
    for key in _HIDDEN_SIZE_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    raise ValueError(
        f"Cannot tell the hidden size of the {role} ({type(model).__name__}): its config has none "
        f"of {', '.join(_HIDDEN_SIZE_KEYS)}; pass a transformer whose config declares one."
    )
