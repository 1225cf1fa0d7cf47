"""Compatible import path ``comlrl.utils.reward_utils``."""

from comlrl.core.callable_types import RewardCallable
from comlrl.core.compat.helpers import call_reward_function_compat as call_reward_function
from comlrl.core.rewards import (
    normalize_reward_lengths,
    resolve_reward_range,
    set_reward_range,
)

__all__ = [
    "RewardCallable",
    "call_reward_function",
    "normalize_reward_lengths",
    "resolve_reward_range",
    "set_reward_range",
]
