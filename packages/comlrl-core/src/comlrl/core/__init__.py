"""CoMLRL core: the shared machinery every algorithm family builds on."""

from comlrl.core.versioning import installed_version

__version__ = installed_version("comlrl-core")

__all__ = ["__version__"]
