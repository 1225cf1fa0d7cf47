"""Compatible import path ``comlrl.trainers.preference.iterative``."""

from comlrl.pbrl import MADPOIterConfig, MADPOIterTrainer, MARLHFIterConfig, MARLHFIterTrainer

__all__ = ["MADPOIterConfig", "MADPOIterTrainer", "MARLHFIterConfig", "MARLHFIterTrainer"]
