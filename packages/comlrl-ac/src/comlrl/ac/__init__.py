"""CoMLRL actor-critic family: IAC (independent critics) and MAAC (one centralized critic)."""

from comlrl.ac.base import ActorCriticTrainerBase
from comlrl.ac.config import ActorCriticConfig, IACConfig, MAACConfig
from comlrl.ac.iac import IACTrainer
from comlrl.ac.maac import MAACTrainer
from comlrl.ac.samples import JointSample, RolloutSample
from comlrl.core.versioning import installed_version

__version__ = installed_version("comlrl-ac")

__all__ = [
    "ActorCriticConfig",
    "ActorCriticTrainerBase",
    "IACConfig",
    "IACTrainer",
    "JointSample",
    "MAACConfig",
    "MAACTrainer",
    "RolloutSample",
    "__version__",
]
