"""What a model class's ``forward`` accepts, probed once per class.

Decoding and the log-prob kernels pass a KV cache and position ids only to models that take them;
transformers renamed the cache argument across versions, so the name is looked up, not assumed.
"""

from __future__ import annotations

import functools
import inspect


def cache_argument(model_cls: type) -> str | None:
    """The forward argument that takes the KV cache (transformers renamed it over versions)."""
    for name in ("cache", "past_key_values"):
        if forward_takes(model_cls, name):
            return name
    return None


def returned_cache(result):
    """The KV cache a forward returned (``cache`` or the older ``past_key_values``)."""
    cache = getattr(result, "cache", None)
    return cache if cache is not None else getattr(result, "past_key_values", None)


@functools.cache
def forward_takes(model_cls: type, name: str) -> bool:
    """Whether ``model_cls.forward`` accepts an argument called ``name``."""
    try:
        return name in inspect.signature(model_cls.forward).parameters
    except (TypeError, ValueError):
        return False
