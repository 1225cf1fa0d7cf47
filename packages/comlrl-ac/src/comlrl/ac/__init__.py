"""CoMLRL actor-critic family: IAC (independent critics) and MAAC (one centralized critic)."""

from importlib.metadata import PackageNotFoundError, version

from comlrl.ac.base import ActorCriticTrainerBase
from comlrl.ac.config import ActorCriticConfig, IACConfig, MAACConfig
from comlrl.ac.iac import IACTrainer
from comlrl.ac.maac import MAACTrainer
from comlrl.ac.samples import JointSample, RolloutSample

try:
    __version__ = version("comlrl-ac")
except PackageNotFoundError:  # a source tree without an install
    __version__ = "0+local"

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
