"""CoMLRL REINFORCE family: MAGRPO, MAREINFORCE, MARLOO, MAReMax and centralized MAGRPO."""

from importlib.metadata import PackageNotFoundError, version

from comlrl.reinforce.centralized import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer
from comlrl.reinforce.config import MAGRPOConfig, MAREINFORCEConfig, MAReMaxConfig, MARLOOConfig
from comlrl.reinforce.magrpo import MAGRPOTrainer, NodeSample
from comlrl.reinforce.variants import MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer

try:
    __version__ = version("comlrl-reinforce")
except PackageNotFoundError:  # a source tree without an install
    __version__ = "0+local"

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
