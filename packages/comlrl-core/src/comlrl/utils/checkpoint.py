"""Compatible import path ``comlrl.utils.checkpoint``.

Only ``read_checkpoint_metadata`` is public here; 1.4.3's other names in this module were its
checkpoint internals (see docs/compatibility.md, "1.4.3 import paths").
"""

from comlrl.core.checkpoint import read_checkpoint_metadata

__all__ = ["read_checkpoint_metadata"]
