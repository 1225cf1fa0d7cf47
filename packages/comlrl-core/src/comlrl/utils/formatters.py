"""Compatible import path ``comlrl.utils.formatters``."""

from comlrl.core.rollout.formatters import Formatter, build_formatters

__all__ = ["Formatter", "build_formatters"]
