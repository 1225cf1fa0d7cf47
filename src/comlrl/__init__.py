"""CoMLRL: cooperative multi-LLM reinforcement learning.

This file belongs to the ``comlrl`` meta-package. It keeps ``comlrl`` a namespace that spans
every installed member package (comlrl-core, comlrl-reinforce, ...), each of which owns one
subpackage, and offers ``comlrl.__version__`` as the reference package did.
"""

from importlib.metadata import PackageNotFoundError, version
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

try:
    __version__ = version("comlrl")
except PackageNotFoundError:  # a source tree without an install
    __version__ = "0+local"
