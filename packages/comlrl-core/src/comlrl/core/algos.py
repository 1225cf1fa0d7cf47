"""Registries of the families' math: advantage estimators, policy losses, preference losses.

The registry lives in core; the functions live in their families (``comlrl.reinforce.advantages``,
``comlrl.reinforce.losses``, ``comlrl.pbrl.dpo``) and register themselves on import. A config
field names the function to use (``advantage_mode``, ``policy_loss``, ``preference_loss``), and
its validation lists what is registered. A third-party package adds its own by registering under
the entry-point group ``comlrl.algos`` a module that calls the ``register_*`` decorators::

    [project.entry-points."comlrl.algos"]
    my_losses = "my_package.losses"

The contracts:

- advantage: ``fn(returns) -> advantages``, both float64 tensors of one group's K sibling
  returns (normalization is applied afterwards, by the family).
- policy loss: ``fn(logps, old_logps, advantages, row_weights, config) -> (loss, metrics)``.
  ``logps`` is a :class:`~comlrl.core.logprobs.TokenLogprobs` (per-token values and mask, one row
  per completion), ``old_logps`` the per-token log-probs at rollout (``[rows, tokens]``) or None
  when the loss does not need them, ``advantages`` one value per row, ``row_weights`` the loss
  aggregation's weight per row (so that summing ``weight * per-row loss`` gives the batch loss);
  ``metrics`` maps names to floats (clip fractions, approximate KL, ...).
- preference loss: ``fn(...) -> DPO output``, as :func:`comlrl.pbrl.dpo.joint_dpo_loss`.

A function declares ``needs_old_logps = True`` (set by ``register_policy_loss(...,
needs_old_logps=True)``) when the trainer must keep the rollout's log-probs for it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from collections.abc import Callable
from typing import Any

ENTRY_POINT_GROUP = "comlrl.algos"

_REGISTRIES: dict[str, dict[str, Callable]] = {
    "advantage": {},
    "policy_loss": {},
    "preference_loss": {},
}
# The family module that registers the built-in functions of each kind.
_HOMES = {
    "advantage": "comlrl.reinforce.advantages",
    "policy_loss": "comlrl.reinforce.losses",
    "preference_loss": "comlrl.pbrl.dpo",
}
_loaded_entry_points = False


def _register(kind: str, name: str, **attributes: Any):
    def decorate(fn: Callable) -> Callable:
        registry = _REGISTRIES[kind]
        if name in registry and registry[name] is not fn:
            raise ValueError(f"a {kind.replace('_', ' ')} named {name!r} is already registered.")
        for key, value in attributes.items():
            setattr(fn, key, value)
        registry[name] = fn
        return fn

    return decorate


def register_advantage(name: str):
    """Decorator: register ``fn(returns) -> advantages`` as the advantage mode ``name``."""
    return _register("advantage", name)


def register_policy_loss(name: str, *, needs_old_logps: bool = False):
    """Decorator: register a policy loss as ``name`` (see the module docs for its contract)."""
    return _register("policy_loss", name, needs_old_logps=needs_old_logps)


def register_preference_loss(name: str):
    """Decorator: register a preference (DPO-style) loss as ``name``."""
    return _register("preference_loss", name)


def _load(kind: str) -> dict[str, Callable]:
    global _loaded_entry_points
    # A family that is not installed leaves only third-party functions of its kind.
    if importlib.util.find_spec(_HOMES[kind].rsplit(".", 1)[0]) is not None:
        importlib.import_module(_HOMES[kind])
    if not _loaded_entry_points:
        _loaded_entry_points = True
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            ep.load()
    return _REGISTRIES[kind]


def available(kind: str) -> tuple[str, ...]:
    """The registered names of ``kind`` ("advantage", "policy_loss" or "preference_loss")."""
    return tuple(sorted(_load(kind)))


def get(kind: str, name: str, field: str) -> Callable:
    """The function registered as ``name``; a ValueError naming ``field`` and the registered
    choices otherwise."""
    registry = _load(kind)
    if name not in registry:
        raise ValueError(
            f"{field} must be one of {', '.join(sorted(registry))}; got {name!r}. Register a "
            f"new one with comlrl.core.algos.register_{kind}."
        )
    return registry[name]
