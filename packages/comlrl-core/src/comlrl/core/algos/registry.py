"""Registries of the training math: advantage estimators, policy losses, preference losses.

The registry lives in core, and so do the built-in policy losses
(:mod:`comlrl.core.algos.losses`: every family that trains a policy picks its loss here). The
families' own functions (the REINFORCE family's advantages, the preference family's DPO losses)
register themselves when their modules load; core finds those modules, and any third party's,
through the entry-point group ``comlrl.algos``, naming no family module itself. A package adds its
own functions by listing a module that calls the ``register_*`` decorators::

    [project.entry-points."comlrl.algos"]
    my_losses = "my_package.losses"

A config field names the function to use (``advantage_mode``, ``policy_loss``,
``preference_loss``), and its validation lists what is registered.

The contracts:

- advantage: ``fn(returns, config, *, baseline=None, table=None) -> advantages``, both
  ``[G, K]`` float64 tensors: G groups (one agent's completions at one tree node each) of K
  sibling returns, one row per group; ``config`` is the family's config. Normalization is a
  separate step, applied afterwards by the family. For an estimator registered with
  ``needs_baseline=True`` the trainer measures ``baseline``, a ``[G]`` tensor of each group's
  baseline measured outside the group (ReMax's greedy joint reward). For one registered with
  ``needs_joint_table=True`` it collects ``table``, a :class:`JointTable`: each group's row of
  the node's joint table, the agent's return of every joint action there and which of the
  group's K completions each one used (``cross`` rollouts hold K^N joint actions per node;
  counterfactual credit reads them). Otherwise both are None.
- policy loss: ``fn(logps, old_logps, advantages, row_weights, config) -> (loss, metrics)``.
  ``logps`` is a :class:`~comlrl.core.logprobs.TokenLogprobs` (per-token values and mask, one row
  per completion), ``old_logps`` the per-token log-probs at rollout (``[rows, tokens]``) or None
  when the loss does not need them, ``advantages`` one value per row, ``row_weights`` the loss
  aggregation's weight per row (so that summing ``weight * per-row loss`` gives the batch loss);
  ``metrics`` maps names to floats (clip fractions, approximate KL, ...). ``config`` is the
  family's config; a loss reads only fields every policy-training family has (``epsilon``,
  ``epsilon_high``, ``clip_ratio_c``, ...), through ``getattr`` with a default for any other.
- preference loss: ``fn(...) -> DPO output``, as :func:`comlrl.pbrl.dpo.joint_dpo_loss`.

A function declares ``needs_old_logps = True`` (set by ``register_policy_loss(...,
needs_old_logps=True)``) when the trainer must keep the rollout's log-probs for it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

ENTRY_POINT_GROUP = "comlrl.algos"

_REGISTRIES: dict[str, dict[str, Callable]] = {
    "advantage": {},
    "policy_loss": {},
    "preference_loss": {},
}
# Core's own built-in functions, imported before the entry points.
_CORE_MODULES = ("comlrl.core.algos.losses",)
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


@dataclass(frozen=True)
class JointTable:
    """The joint actions of G tree nodes, seen from one agent: what an advantage registered
    with ``needs_joint_table=True`` receives as ``table=``.

    ``returns[g, a]`` (float64, ``[G, A]``) is the agent's return of joint action ``a`` at
    group ``g``'s node, and ``index[g, a]`` (int64, ``[G, A]``) which of the group's K
    completions the agent contributed to it. In ``aligned`` rollouts A = K and ``index[g, a] =
    a``; in ``cross`` rollouts A = K^N and each completion appears in K^(N-1) joint actions.
    """

    returns: torch.Tensor
    index: torch.Tensor

    def __post_init__(self) -> None:
        if self.returns.shape != self.index.shape or self.returns.dim() != 2:
            raise ValueError(
                "JointTable: returns and index must both be [G, A] tensors, got "
                f"{tuple(self.returns.shape)} and {tuple(self.index.shape)}."
            )


def register_advantage(name: str, *, needs_baseline: bool = False, needs_joint_table: bool = False):
    """Decorator: register ``fn(returns, config, *, baseline=None, table=None) -> advantages``
    (``[G, K]`` in and out) as the advantage mode ``name``. ``needs_baseline``: the trainer
    measures each group's baseline (``[G]``) and passes it; ``needs_joint_table``: it collects
    the nodes' joint tables (a :class:`JointTable`; see the module docs) and passes them. An
    estimator that reads neither takes them as ignored keywords (``**_``)."""
    return _register(
        "advantage", name, needs_baseline=needs_baseline, needs_joint_table=needs_joint_table
    )


def register_policy_loss(name: str, *, needs_old_logps: bool = False):
    """Decorator: register a policy loss as ``name`` (see the module docs for its contract)."""
    return _register("policy_loss", name, needs_old_logps=needs_old_logps)


def register_preference_loss(name: str):
    """Decorator: register a preference (DPO-style) loss as ``name``."""
    return _register("preference_loss", name)


def _load(kind: str) -> dict[str, Callable]:
    global _loaded_entry_points
    if not _loaded_entry_points:
        _loaded_entry_points = True
        for module in _CORE_MODULES:
            importlib.import_module(module)
        # A family that is not installed has no entry point: only the others' functions.
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            ep.load()
    return _REGISTRIES[kind]


def available(kind: str, *, builtin: bool = False) -> tuple[str, ...]:
    """The registered names of ``kind`` ("advantage", "policy_loss" or "preference_loss");
    ``builtin``: only those the comlrl packages themselves register."""
    registry = _load(kind)
    return tuple(
        sorted(
            name
            for name, fn in registry.items()
            if not builtin or fn.__module__.startswith("comlrl.")
        )
    )


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
