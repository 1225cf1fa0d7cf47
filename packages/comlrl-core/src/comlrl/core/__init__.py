"""CoMLRL core: the shared machinery every algorithm family builds on."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("comlrl-core")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0+local"

__all__ = ["__version__"]
