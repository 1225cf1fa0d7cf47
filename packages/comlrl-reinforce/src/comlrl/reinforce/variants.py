"""MAREINFORCE, MARLOO and MAReMax: MAGRPO with another baseline."""

from __future__ import annotations

from comlrl.reinforce.config import MAREINFORCEConfig, MAReMaxConfig, MARLOOConfig
from comlrl.reinforce.magrpo import MAGRPOTrainer


class MAREINFORCETrainer(MAGRPOTrainer):
    """Multi-agent REINFORCE: the raw return is the advantage (no baseline)."""

    algorithm_name = "MAREINFORCE"
    default_config_cls = MAREINFORCEConfig


class MARLOOTrainer(MAGRPOTrainer):
    """Multi-agent RLOO: each completion's baseline is the mean return of its K-1 siblings."""

    algorithm_name = "MARLOO"
    default_config_cls = MARLOOConfig


class MAReMaxTrainer(MAGRPOTrainer):
    """Multi-agent ReMax: the baseline is the best sibling return."""

    algorithm_name = "MAReMax"
    default_config_cls = MAReMaxConfig
