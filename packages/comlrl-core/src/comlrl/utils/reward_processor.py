"""Compatible import path ``comlrl.utils.reward_processor``."""

from comlrl.core.rewards import RewardProcessors

__all__ = ["RewardProcessors"]
