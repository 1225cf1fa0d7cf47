"""Compatible import path ``comlrl.utils``: the user-facing helpers of CoMLRL 1.4.3."""

from comlrl.core.devices import normalize_parallel_training, resolve_devices, resolve_single_device
from comlrl.core.models import (
    add_special_tokens,
    ensure_pad_token,
    freeze_model,
    infer_model_name,
    resolve_model_sources,
    resolve_tokenizers,
)
from comlrl.core.rewards import (
    RewardProcessors,
    call_reward_function,
    normalize_reward_lengths,
    resolve_reward_range,
    set_reward_range,
)
from comlrl.core.rollout.formatters import build_formatters

__all__ = [
    "RewardProcessors",
    "add_special_tokens",
    "build_formatters",
    "call_reward_function",
    "ensure_pad_token",
    "freeze_model",
    "infer_model_name",
    "normalize_parallel_training",
    "normalize_reward_lengths",
    "resolve_devices",
    "resolve_model_sources",
    "resolve_reward_range",
    "resolve_single_device",
    "resolve_tokenizers",
    "set_reward_range",
]
