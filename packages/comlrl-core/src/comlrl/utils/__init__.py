"""Compatible import path ``comlrl.utils``: the user-facing helpers of CoMLRL 1.4.3."""

from comlrl.core.checkpoint import read_checkpoint_metadata
from comlrl.core.compat.helpers import (
    apply_tokenizer_specials,
    ensure_tokenizer,
    reference_kl_coef,
    reference_kl_enabled,
)
from comlrl.core.compat.helpers import (
    call_reward_function_compat as call_reward_function,
)
from comlrl.core.compat.reference import (
    clone_reference_models,
    load_reference_models_from_sources,
    reference_kl_for_sequence,
    resolve_reference_devices,
    validate_reference_kl_config,
)
from comlrl.core.distributed import DistributedContext, local_context, unwrap_model
from comlrl.core.models import (
    add_special_tokens,
    ensure_pad_token,
    freeze_model,
    infer_model_name,
    resolve_model_sources,
    resolve_tokenizers,
)
from comlrl.core.placement.devices import (
    normalize_parallel_training,
    resolve_devices,
    resolve_single_device,
)
from comlrl.core.rewards import (
    RewardProcessors,
    normalize_reward_lengths,
    resolve_reward_range,
    set_reward_range,
)
from comlrl.core.rollout.formatters import build_formatters

__all__ = [
    "DistributedContext",
    "RewardProcessors",
    "add_special_tokens",
    "apply_tokenizer_specials",
    "build_formatters",
    "call_reward_function",
    "clone_reference_models",
    "ensure_pad_token",
    "ensure_tokenizer",
    "freeze_model",
    "infer_model_name",
    "load_reference_models_from_sources",
    "local_context",
    "normalize_parallel_training",
    "normalize_reward_lengths",
    "read_checkpoint_metadata",
    "reference_kl_coef",
    "reference_kl_enabled",
    "reference_kl_for_sequence",
    "resolve_devices",
    "resolve_model_sources",
    "resolve_reference_devices",
    "resolve_reward_range",
    "resolve_single_device",
    "resolve_tokenizers",
    "set_reward_range",
    "unwrap_model",
    "validate_reference_kl_config",
]
