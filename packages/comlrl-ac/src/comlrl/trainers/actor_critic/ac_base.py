"""Compatible import path ``comlrl.trainers.actor_critic.ac_base``."""

from comlrl.ac import ActorCriticTrainerBase

__all__ = ["ActorCriticTrainerBase"]
