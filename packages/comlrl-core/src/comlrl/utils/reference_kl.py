"""Compatible import path ``comlrl.utils.reference_kl``."""

from comlrl.core.compat.helpers import reference_kl_coef, reference_kl_enabled
from comlrl.core.compat.reference import (
    clone_reference_models,
    load_reference_models_from_sources,
    reference_kl_for_sequence,
    resolve_reference_devices,
    validate_reference_kl_config,
)

__all__ = [
    "clone_reference_models",
    "load_reference_models_from_sources",
    "reference_kl_coef",
    "reference_kl_enabled",
    "reference_kl_for_sequence",
    "resolve_reference_devices",
    "validate_reference_kl_config",
]
