"""The REINFORCE family's recipes for ``MAGRPOConfig.preset(name, **fields)``, and the check for
settings that do nothing in the chosen mode.

A recipe fills its fields; a field passed to ``preset`` with another value raises a ValueError
naming both (``CommonConfig.preset``), so a recipe never overrides a setting silently. A setting
that has no effect in the chosen mode raises when it differs from its default, so a config
rebuilt with ``dataclasses.replace`` or from its saved YAML (every field, defaults included)
stays valid.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# recipe -> the fields it sets
PRESETS: dict[str, dict[str, Any]] = {
    "grpo": {},
    # Dr. GRPO: no std division, each completion's token sum divided by max_new_tokens.
    "dr_grpo": {"advantage_normalization": False, "loss_aggregation": "constant"},
    # REINFORCE++ (baseline form): z-score over each agent's whole update batch.
    "reinforce_pp": {"advantage_normalization": True, "advantage_normalization_scope": "batch"},
}
PRESET_ALIASES = {"dr.grpo": "dr_grpo", "reinforce++": "reinforce_pp"}


def is_changed(config: Any, name: str) -> bool:
    """Whether field ``name`` differs from its default in ``config``'s class."""
    field = next(f for f in dataclasses.fields(config) if f.name == name)
    if field.default is not dataclasses.MISSING:
        default = field.default
    else:
        default = field.default_factory()
    return getattr(config, name) != default


def refuse_inert(config: Any, name: str, reason: str) -> None:
    """Raise a ValueError naming ``name`` when it was set to a non-default value although it
    does nothing (``reason`` says why and what to change)."""
    if is_changed(config, name):
        raise ValueError(f"{name}={getattr(config, name)!r} has no effect: {reason}.")
