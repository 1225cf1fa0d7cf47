"""Compatible import path ``comlrl.trainers.reinforce.maremax``."""

from comlrl.reinforce import MAReMaxConfig, MAReMaxTrainer

__all__ = ["MAReMaxConfig", "MAReMaxTrainer"]
