"""Compatible import path ``comlrl.schedulers.device_scheduler``."""

from comlrl.schedulers import DeviceScheduler, DeviceSpec, normalize_parallel_training

__all__ = ["DeviceScheduler", "DeviceSpec", "normalize_parallel_training"]
