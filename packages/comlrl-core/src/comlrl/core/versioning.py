"""The installed version of a CoMLRL distribution, for each package's ``__version__``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

SOURCE_TREE_VERSION = "0+local"


def installed_version(*distributions: str) -> str:
    """The version of the first of ``distributions`` that is installed.

    A source tree that was never installed has no metadata; it reports ``0+local``.
    """
    for dist in distributions:
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return SOURCE_TREE_VERSION
