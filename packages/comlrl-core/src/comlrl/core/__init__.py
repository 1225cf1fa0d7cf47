"""CoMLRL core: the shared machinery every algorithm family builds on."""

from __future__ import annotations

from comlrl.core.versioning import installed_version

__version__ = installed_version("comlrl-core")

__all__ = ["__version__"]
