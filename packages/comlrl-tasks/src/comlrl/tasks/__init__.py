"""CoMLRL tasks package."""

from comlrl.core.versioning import installed_version

__version__ = installed_version("comlrl-tasks")
