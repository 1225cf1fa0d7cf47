"""Compatible import path ``comlrl.trainers.actor_critic.maac``."""

from comlrl.ac import MAACConfig, MAACTrainer
from comlrl.core.callable_types import MetricsCallback, RewardFunc
from comlrl.core.rollout.formatters import Formatter

__all__ = ["Formatter", "MAACConfig", "MAACTrainer", "MetricsCallback", "RewardFunc"]
