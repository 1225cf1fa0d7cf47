"""Compatible import path ``comlrl.models`` (CoMLRL 1.4.3's critic building blocks).

Ships with comlrl-ac, the family whose critics use it. Only ``ValueHead`` has an equivalent
here; see docs/compatibility.md for 1.4.3's ``CausalLMWithValueHead`` and
``ActorCriticOutput``.
"""

from comlrl.models.actor_critic import ValueHead

__all__ = ["ValueHead"]
