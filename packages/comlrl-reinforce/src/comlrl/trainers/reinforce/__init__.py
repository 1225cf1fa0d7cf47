"""Compatible import path ``comlrl.trainers.reinforce`` (as in CoMLRL 1.4.3).

A package, as in 1.4.3, so its submodules (``.magrpo``, ``.centralized_magrpo``,
``.mareinforce``, ``.maremax``, ``.marloo``) import too; all of them re-export
:mod:`comlrl.reinforce`.
"""

from comlrl.reinforce import (
    CentralizedMAGRPOConfig,
    CentralizedMAGRPOTrainer,
    MAGRPOConfig,
    MAGRPOTrainer,
    MAREINFORCEConfig,
    MAREINFORCETrainer,
    MAReMaxConfig,
    MAReMaxTrainer,
    MARLOOConfig,
    MARLOOTrainer,
)

__all__ = [
    "CentralizedMAGRPOConfig",
    "CentralizedMAGRPOTrainer",
    "MAGRPOConfig",
    "MAGRPOTrainer",
    "MAREINFORCEConfig",
    "MAREINFORCETrainer",
    "MAReMaxConfig",
    "MAReMaxTrainer",
    "MARLOOConfig",
    "MARLOOTrainer",
]
