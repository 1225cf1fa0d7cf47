"""Dropout switched off for a scope, with the model left in training mode.

An RL update compares the policy's log-probs with those the rollout policy gave (the ratio) and
with a frozen reference (the KL); the samples came from the model without dropout (generation
runs in eval mode). With dropout on, each scoring draws another random sub-network, so even the
first pass's ratio is not 1 and the gradient is of a policy that never sampled. ``model.eval()``
would turn dropout off too, but it also turns off what transformers ties to ``training``, such
as gradient checkpointing, which the gradient passes need.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from comlrl.core.models.adapters import shared_base_of

# Attention modules that apply dropout functionally keep its rate in a float attribute
# (transformers' Llama/Qwen family: ``attention_dropout``; some others: ``dropout``).
_RATE_ATTRIBUTES = ("attention_dropout", "attn_dropout", "dropout", "dropout_p")


@contextmanager
def dropout_off(model: nn.Module) -> Iterator[nn.Module]:
    """Within the scope every dropout of ``model`` has rate 0: each
    :class:`torch.nn.Dropout`-like module, and the float rates attention modules read at
    forward time. The rates come back on exit (also on error); ``model.training`` is untouched.
    An adapter view of a shared base (:class:`comlrl.core.models.adapters.AdapterAgent`, its
    body or reference) holds the shared model as a plain attribute, outside its own
    ``modules()``: the scope reaches that model, so its LoRA dropout is off too.
    """
    shared = shared_base_of(model)
    root = shared.model if shared is not None else model
    saved = [
        (owner, name, rate)
        for owner, name in _rate_holders(root)
        if isinstance(rate := getattr(owner, name), float) and rate > 0
    ]
    try:
        for owner, name, _ in saved:
            setattr(owner, name, 0.0)
        yield model
    finally:
        for owner, name, rate in saved:
            setattr(owner, name, rate)


# The modules and attribute names that hold a dropout rate, per model, found once: walking every
# module of the tree on each scoring call was a visible share of a small model's update. Rates
# are read afresh on every entry; a model restructured in place after its first scope (modules
# added) keeps its first list.
_HOLDERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _rate_holders(root: nn.Module) -> list[tuple[object, str]]:
    """(module, attribute) pairs of ``root``'s tree that hold a float dropout rate: the ``p``
    of every :class:`torch.nn.Dropout`-like module and the float rates of ``_RATE_ATTRIBUTES``."""
    found = _HOLDERS.get(root)
    if found is None:
        found = _HOLDERS[root] = _find_rate_holders(root)
    return found


def _find_rate_holders(root: nn.Module) -> list[tuple[object, str]]:
    found: list[tuple[object, str]] = []
    for module in root.modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
            found.append((module, "p"))
            continue
        for name in _RATE_ATTRIBUTES:
            rate = module.__dict__.get(name)
            if isinstance(rate, float) and not isinstance(rate, bool):
                found.append((module, name))
    return found
