"""MARLHF's ``rl:`` section: the settings of its RL phase, as the RL algorithm's config takes them.

``rl`` maps fields of ``rl_algorithm``'s config (``MAGRPOConfig``, ``IACConfig``, ...) to values;
the RL phase's config is MARLHF's shared settings (learning rate, sampling, logging, ...) with
``rl`` on top. MARLHF's flat RL fields (``policy_loss``, ``num_generations``, the critic and value
fields, ...) are deprecated aliases of the same ``rl`` keys: a flat value is used when ``rl``
does not set the key, and one that disagrees with ``rl`` is an error.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from comlrl.core.config.fields import Check, check_of

# MARLHF's flat fields that configure only its RL phase: deprecated aliases of ``rl`` keys.
FLAT_ALIASES = (
    "advantage_mode",
    "num_generations",
    "policy_loss",
    "critic_model_name",
    "critic_learning_rate",
    "critic_devices",
    "use_separate_critic",
    "critic_type",
    "value_loss_coef",
    "value_clip_range",
    "critic_value_head_hidden_dim",
    "value_head_hidden_dim",
)
# RL-config fields MARLHF decides itself, and where to set them instead.
FIXED = {
    "num_turns": "the RL phase is single-turn",
    "num_agents": "the RL phase trains MARLHF's own agents",
    "num_train_epochs": "MARLHF's own num_train_epochs counts the RL epochs; set it there",
    "shuffle_dataset": "MARLHF's own shuffle_dataset orders the RL epochs; set it there",
    "output_dir": "the RL phase logs into MARLHF's run; set output_dir there",
}


class RLSection(Check):
    """None or a mapping of field names (text) to values; keys MARLHF fixes are refused."""

    reads_config = True  # names rl_algorithm in its errors

    def __call__(self, name, value, config):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError(
                f"{name} must be None or a mapping from fields of the RL algorithm's config "
                f"(rl_algorithm={config.rl_algorithm!r}) to values, e.g. {{policy_loss: ppo}}; "
                f"got {type(value).__name__}."
            )
        for key in value:
            if not isinstance(key, str):
                raise ValueError(f"{name} keys are field names, got {key!r}.")
            if key in FIXED:
                raise ValueError(f"{name}.{key} cannot be set: {FIXED[key]}.")
        return dict(value)

    def describe(self, cls):
        return "None or a mapping of the RL algorithm's config fields to values"


def fold_rl_section(config: Any) -> None:
    """Check ``config.rl`` against the RL algorithm's config fields (when its package is
    installed) and reconcile the flat aliases with it: an alias takes the ``rl`` value, and an
    alias set to something else than both its default and the ``rl`` value is an error."""
    section = config.rl or {}
    valid = rl_config_fields(config.rl_algorithm)
    if valid is not None:
        unknown = sorted(set(section) - valid)
        if unknown:
            raise ValueError(
                f"rl.{unknown[0]} is not a setting of rl_algorithm={config.rl_algorithm!r}; "
                f"valid keys: {', '.join(sorted(valid - set(FIXED)))}."
            )
    fields = {f.name: f for f in dataclasses.fields(config)}
    for name in FLAT_ALIASES:
        if name not in section:
            continue
        check = check_of(fields[name])
        value = check(f"rl.{name}", section[name], config) if check else section[name]
        current = getattr(config, name)
        if current != fields[name].default and current != value:
            raise ValueError(
                f"{name}={current!r} and rl.{name}={value!r} disagree; set it once, under rl "
                f"({name} is its deprecated flat alias)."
            )
        setattr(config, name, value)
        section[name] = value
    if config.rl is not None:
        config.rl = section


def rl_config_fields(name: str) -> set[str] | None:
    """The field names of the config of the RL algorithm registered as ``name`` (None when no
    installed package provides it: building the trainer then says what to install)."""
    from comlrl.core.plugins import available_algorithms, load_algorithm

    if name not in available_algorithms():
        return None
    cls = getattr(load_algorithm(name), "default_config_cls", None)
    return None if cls is None else {f.name for f in dataclasses.fields(cls)}
