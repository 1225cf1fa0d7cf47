"""CoMLRL ac package."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("comlrl-ac")
except PackageNotFoundError:  # a source tree without an install
    __version__ = "0+local"
