"""Compatible import path ``comlrl.trainers.actor_critic.iac``."""

from comlrl.ac import IACConfig, IACTrainer, RolloutSample
from comlrl.core.callable_types import MetricsCallback, RewardFunc
from comlrl.core.rollout.formatters import Formatter

__all__ = ["Formatter", "IACConfig", "IACTrainer", "MetricsCallback", "RewardFunc", "RolloutSample"]
