"""Compatible import path ``comlrl.models.actor_critic``."""

from comlrl.ac.critic_models import ValueHead

__all__ = ["ValueHead"]
