"""Compatible import path ``comlrl.schedulers`` (CoMLRL 1.4.3's device scheduler)."""

from comlrl.core.callable_types import DeviceSpec
from comlrl.core.compat.devices import DeviceScheduler
from comlrl.core.placement.devices import normalize_parallel_training

__all__ = ["DeviceScheduler", "DeviceSpec", "normalize_parallel_training"]
