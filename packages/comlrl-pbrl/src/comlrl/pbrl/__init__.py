"""CoMLRL preference-based family: MADPO, MARLHF and their iterative (online) variants."""

from comlrl.core.centralized import (
    CentralizedCollaboration,
    CentralizedComparatorAdapter,
    CentralizedComparatorParseError,
    TaggedCentralizedComparatorAdapter,
)
from comlrl.core.versioning import installed_version
from comlrl.pbrl.config import MADPOConfig, MARLHFConfig
from comlrl.pbrl.iter_config import MADPOIterConfig, MARLHFIterConfig
from comlrl.pbrl.iterative import MADPOIterTrainer, MARLHFIterTrainer
from comlrl.pbrl.madpo import MADPOTrainer
from comlrl.pbrl.marlhf import MARLHFTrainer
from comlrl.pbrl.pairs import AgentPreferenceTensors, PreferencePair
from comlrl.pbrl.reward_model import JointRewardModel

__version__ = installed_version("comlrl-pbrl")

__all__ = [
    "AgentPreferenceTensors",
    "CentralizedCollaboration",
    "CentralizedComparatorAdapter",
    "CentralizedComparatorParseError",
    "MADPOConfig",
    "MADPOIterConfig",
    "MADPOIterTrainer",
    "MADPOTrainer",
    "JointRewardModel",
    "MARLHFConfig",
    "MARLHFIterConfig",
    "MARLHFIterTrainer",
    "MARLHFTrainer",
    "PreferencePair",
    "TaggedCentralizedComparatorAdapter",
    "__version__",
]
