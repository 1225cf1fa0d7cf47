"""Compatible import path ``comlrl.trainers.reinforce.marloo``."""

from comlrl.reinforce import MARLOOConfig, MARLOOTrainer

__all__ = ["MARLOOConfig", "MARLOOTrainer"]
