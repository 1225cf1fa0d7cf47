"""Dropout switched off for a scope, with the model left in training mode.

An RL update compares the policy's log-probs with those the rollout policy gave (the ratio) and
with a frozen reference (the KL); the samples came from the model without dropout (generation
runs in eval mode). With dropout on, each scoring draws another random sub-network, so even the
first pass's ratio is not 1 and the gradient is of a policy that never sampled. ``model.eval()``
would turn dropout off too, but it also turns off what transformers ties to ``training``, such
as gradient checkpointing, which the gradient passes need.
"""

from __future__ import annotations

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
    saved: list[tuple[object, str, float]] = []
    shared = shared_base_of(model)
    for module in (shared.model if shared is not None else model).modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
            saved.append((module, "p", module.p))
            continue
        for name in _RATE_ATTRIBUTES:
            rate = module.__dict__.get(name)
            if isinstance(rate, float) and not isinstance(rate, bool) and rate > 0:
                saved.append((module, name, rate))
    try:
        for owner, name, _ in saved:
            setattr(owner, name, 0.0)
        yield model
    finally:
        for owner, name, rate in saved:
            setattr(owner, name, rate)
