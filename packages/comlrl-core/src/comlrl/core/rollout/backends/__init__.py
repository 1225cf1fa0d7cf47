"""Rollout backends: what samples the completions (``rollout_backend`` chooses one by name).

:mod:`.protocol` is the contract (:class:`RolloutBackend`: ``generate_ids`` and
``on_weights_updated``), :mod:`.registry` the names the field accepts, :mod:`.hf` the default
backend, :mod:`.vllm` the vLLM one, and :mod:`.text` the text form core samples through.
"""

from comlrl.core.rollout.backends.protocol import BackendInputs, RolloutBackend, SampledIds
from comlrl.core.rollout.backends.registry import (
    BackendEntry,
    available_rollout_backends,
    build_rollout_backend,
    check_rollout_backend,
    register_rollout_backend,
    unregister_rollout_backend,
)
from comlrl.core.rollout.backends.text import TextSampling

__all__ = [
    "BackendEntry",
    "BackendInputs",
    "RolloutBackend",
    "SampledIds",
    "TextSampling",
    "available_rollout_backends",
    "build_rollout_backend",
    "check_rollout_backend",
    "register_rollout_backend",
    "unregister_rollout_backend",
]
