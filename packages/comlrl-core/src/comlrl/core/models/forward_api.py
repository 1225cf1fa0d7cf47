"""What a model class's ``forward`` accepts, probed once per class.

Decoding and the log-prob kernels pass a KV cache and position ids only to models that take them;
transformers renamed the cache argument across versions, so the name is looked up, not assumed.
"""

from __future__ import annotations

import inspect
from typing import Any


def cache_argument(model_cls: type[Any]) -> str | None:
    """The forward argument that takes the KV cache (transformers renamed it over versions)."""
    for name in ("cache", "past_key_values"):
        if forward_takes(model_cls, name):
            return name
    return None


def returned_cache(result):
    """The KV cache a forward returned (``cache`` or the older ``past_key_values``)."""
    cache = getattr(result, "cache", None)
    return cache if cache is not None else getattr(result, "past_key_values", None)


# The forward parameter names of each model class probed so far.
_FORWARD_PARAMETERS: dict[type, frozenset[str]] = {}


def forward_takes(model_cls: type[Any], name: str) -> bool:
    """Whether ``model_cls.forward`` accepts an argument called ``name``."""
    names = _FORWARD_PARAMETERS.get(model_cls)
    if names is None:
        try:
            names = frozenset(inspect.signature(model_cls.forward).parameters)
        except (TypeError, ValueError):
            names = frozenset()
        _FORWARD_PARAMETERS[model_cls] = names
    return name in names
