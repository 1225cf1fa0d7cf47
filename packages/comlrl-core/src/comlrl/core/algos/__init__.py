"""The training math's registries (:mod:`~comlrl.core.algos.registry`, with the contracts) and
core's built-in policy losses, clipped ratio and z-score (:mod:`~comlrl.core.algos.losses`)."""

from __future__ import annotations

from comlrl.core.algos.registry import (
    ENTRY_POINT_GROUP,
    JointTable,
    available,
    get,
    register_advantage,
    register_policy_loss,
    register_preference_loss,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "JointTable",
    "register_advantage",
    "register_policy_loss",
    "register_preference_loss",
    "available",
    "get",
]
