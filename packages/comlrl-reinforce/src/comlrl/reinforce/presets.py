"""Variant presets that fill only what the user left unset, and checks for settings that do
nothing in the chosen mode.

A config remembers which fields its constructor was given (``explicit_fields``). A preset
(``variant="dr_grpo"``, ...) then fills only the other fields; a given field whose value differs
from the preset's raises a ValueError naming both, so a preset never overwrites a setting
silently. A setting that has no effect in the chosen mode raises too (when it differs from its
default; a config rebuilt with ``dataclasses.replace`` passes every field, defaults included).
"""

from __future__ import annotations

import dataclasses
from typing import Any

# variant -> the fields it sets
PRESETS: dict[str, dict[str, Any]] = {
    "grpo": {},
    # Dr. GRPO: no std division, each completion's token sum divided by max_new_tokens.
    "dr_grpo": {"advantage_normalization": False, "loss_aggregation": "constant"},
    # REINFORCE++ (baseline form): z-score over each agent's whole update batch.
    "reinforce_pp": {"advantage_normalization": True, "advantage_normalization_scope": "batch"},
}


class RemembersExplicitFields:
    """Mixin for a dataclass config: records the names of the fields passed to the constructor
    (positionally or by keyword) as ``explicit_fields``."""

    def __new__(cls, *args: Any, **kwargs: Any):
        self = super().__new__(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        self.__dict__["_explicit"] = frozenset(names[: len(args)]) | frozenset(kwargs)
        return self

    @property
    def explicit_fields(self) -> frozenset[str]:
        """The fields the constructor was given."""
        return self.__dict__.get("_explicit", frozenset())


def apply_preset(config: Any) -> None:
    """Fill the fields of ``config.variant``'s preset that the user left unset; raise when a
    given field conflicts with it."""
    preset = PRESETS.get(config.variant or "grpo", {})
    for name, value in preset.items():
        current = getattr(config, name)
        if name in config.explicit_fields and current != value:
            raise ValueError(
                f"{name}={current!r} conflicts with variant={config.variant!r}, which sets "
                f"{name}={value!r}. Leave {name} unset to use the preset, or drop variant and "
                "set the fields yourself."
            )
        setattr(config, name, value)


def resolve_alias(config: Any, old: str, new: str, mapping: dict[str, str]) -> None:
    """Field ``old`` is an earlier name of ``new`` with its own values (``mapping``): when set,
    its value counts as an explicit setting of ``new``; both set and disagreeing raises."""
    value = getattr(config, old)
    if value is None:
        return
    meant = mapping[value]
    if new in config.explicit_fields and getattr(config, new) != meant:
        raise ValueError(
            f"{old}={value!r} (= {new}={meant!r}) conflicts with {new}={getattr(config, new)!r}; "
            f"set only {new}."
        )
    setattr(config, new, meant)
    config.__dict__["_explicit"] = config.explicit_fields | {new}


def is_changed(config: Any, name: str) -> bool:
    """Whether ``name`` was given and differs from its default (so it was meant to act)."""
    if name not in config.explicit_fields:
        return False
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
