"""Compatible import path ``comlrl.utils.formatters``."""

from comlrl.core.rollout.formatters import build_formatters

__all__ = ["build_formatters"]
