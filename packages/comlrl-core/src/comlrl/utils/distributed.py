"""Compatible import path ``comlrl.utils.distributed``."""

from comlrl.core.distributed import DistributedContext, local_context, unwrap_model

__all__ = ["DistributedContext", "local_context", "unwrap_model"]
