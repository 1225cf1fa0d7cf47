"""Compatible import path ``comlrl.trainers.reinforce.magrpo``."""

from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer, NodeSample

__all__ = ["MAGRPOConfig", "MAGRPOTrainer", "NodeSample"]
