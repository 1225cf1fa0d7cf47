"""Compatible import path ``comlrl.utils.model_loading``."""

from comlrl.core.models import freeze_model, infer_model_name, resolve_model_sources

__all__ = ["freeze_model", "infer_model_name", "resolve_model_sources"]
