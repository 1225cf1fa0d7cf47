"""Compatible import path ``comlrl.trainers.reinforce.centralized_magrpo``."""

from comlrl.reinforce import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer

__all__ = ["CentralizedMAGRPOConfig", "CentralizedMAGRPOTrainer"]
