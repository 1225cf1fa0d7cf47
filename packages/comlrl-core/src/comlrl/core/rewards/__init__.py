"""Reward functions: dispatch by signature, validated scoring, processors and declared ranges."""

from .caller import RewardCaller
from .dispatch import RewardError, call_reward_function, normalize_reward_lengths
from .processors import RewardProcessors
from .ranges import get_reward_range, resolve_reward_range, set_reward_range
from .shapes import RewardScores

__all__ = [
    "RewardCaller",
    "RewardError",
    "RewardProcessors",
    "RewardScores",
    "call_reward_function",
    "get_reward_range",
    "normalize_reward_lengths",
    "resolve_reward_range",
    "set_reward_range",
]
