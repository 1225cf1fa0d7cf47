"""Compatible import path ``comlrl.trainers.reinforce.mareinforce``."""

from comlrl.reinforce import MAREINFORCEConfig, MAREINFORCETrainer

__all__ = ["MAREINFORCEConfig", "MAREINFORCETrainer"]
