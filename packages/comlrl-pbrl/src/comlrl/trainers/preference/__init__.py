"""Compatible import path ``comlrl.trainers.preference`` (as in CoMLRL 1.4.3).

A package, as in 1.4.3: ``.madpo``, ``.marlhf``, ``.iterative``, ``.centralized`` and
``.collaboration`` import too, each re-exporting :mod:`comlrl.pbrl`.
"""

from comlrl.core.centralized import (
    CentralizedComparatorAdapter,
    CentralizedComparatorParseError,
    TaggedCentralizedComparatorAdapter,
)
from comlrl.pbrl import (
    JointRewardModel,
    MADPOConfig,
    MADPOIterConfig,
    MADPOIterTrainer,
    MADPOTrainer,
    MARLHFConfig,
    MARLHFIterConfig,
    MARLHFIterTrainer,
    MARLHFTrainer,
)

__all__ = [
    "CentralizedComparatorAdapter",
    "CentralizedComparatorParseError",
    "JointRewardModel",
    "MADPOConfig",
    "MADPOIterConfig",
    "MADPOIterTrainer",
    "MADPOTrainer",
    "MARLHFConfig",
    "MARLHFIterConfig",
    "MARLHFIterTrainer",
    "MARLHFTrainer",
    "TaggedCentralizedComparatorAdapter",
]
