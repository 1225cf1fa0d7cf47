"""CoMLRL: cooperative multi-LLM reinforcement learning.

This file ships with comlrl-core, which every other CoMLRL package depends on, so ``comlrl``
and ``comlrl.__version__`` exist however few of the packages are installed. It is written
pkgutil-style: ``__path__`` spans every ``comlrl`` directory on ``sys.path``, so each member
package (comlrl-reinforce, comlrl-tasks, ...) contributes its own subpackage.

``__version__`` is the version of the ``comlrl`` distribution when it is installed (as with
CoMLRL 1.4.3), else that of comlrl-core.
"""

# Written in the canonical one-line form, which source-reading tools (griffe, for the API page)
# recognise as a pkgutil-style namespace.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from comlrl.core.versioning import installed_version  # noqa: E402  (needs __path__ set first)

__version__ = installed_version("comlrl", "comlrl-core")
