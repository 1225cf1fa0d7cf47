"""Compatible import path ``comlrl.models.actor_critic``."""

from comlrl.ac.values import ValueHead

__all__ = ["ValueHead"]
