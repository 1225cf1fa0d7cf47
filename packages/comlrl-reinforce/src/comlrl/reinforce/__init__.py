"""CoMLRL REINFORCE family: MAGRPO, MAREINFORCE, MARLOO, MAReMax and centralized MAGRPO."""

from comlrl.core.versioning import installed_version
from comlrl.reinforce.centralized import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer
from comlrl.reinforce.config import MAGRPOConfig, MAREINFORCEConfig, MAReMaxConfig, MARLOOConfig
from comlrl.reinforce.magrpo import MAGRPOTrainer, NodeSample
from comlrl.reinforce.variants import MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer

__version__ = installed_version("comlrl-reinforce")

__all__ = [
    "CentralizedMAGRPOConfig",
    "CentralizedMAGRPOTrainer",
    "MAGRPOConfig",
    "MAGRPOTrainer",
    "MAREINFORCEConfig",
    "MAREINFORCETrainer",
    "MARLOOConfig",
    "MARLOOTrainer",
    "MAReMaxConfig",
    "MAReMaxTrainer",
    "NodeSample",
    "__version__",
]
