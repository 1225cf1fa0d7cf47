"""``DeviceScheduler``: CoMLRL 1.4.3's device-resolution entry point, over
:mod:`comlrl.core.placement.devices`.

The trainers here resolve devices through ``comlrl.core.placement.devices`` directly; this class
keeps the 1.4.3 spelling (static methods, a ``kind`` keyword naming the field) for user code that
calls it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from comlrl.core.callable_types import DeviceSpec
from comlrl.core.placement.devices import resolve_devices, resolve_single_device


class DeviceScheduler:
    """Static helpers that turn ``agent_devices`` / ``critic_devices`` specs into devices."""

    @staticmethod
    def resolve_devices(
        spec: DeviceSpec | None, num_devices: int, *, kind: str = "devices"
    ) -> list[torch.device]:
        """``num_devices`` devices from a spec: None/"auto", one device, or a list of 1 or N."""
        if num_devices < 1:
            raise ValueError(f"{kind} count must be >= 1, got {num_devices}.")
        return resolve_devices(spec, num_devices, field=kind)

    @staticmethod
    def resolve_single_device(*specs: DeviceSpec | None) -> torch.device:
        """The device of the first spec that is not None (a list gives its first entry)."""
        for spec in specs:
            if spec is None:
                continue
            if isinstance(spec, (list, tuple)):
                if not spec:
                    raise ValueError("a device spec list must not be empty.")
                spec = spec[0]
            return resolve_single_device(spec)
        return resolve_single_device(None)

    @staticmethod
    def assign_devices(
        num_agents: int,
        agent_devices: DeviceSpec | None,
        critic_devices: DeviceSpec | None,
        *,
        use_separate_critic: bool,
    ) -> tuple[list[torch.device], list[torch.device]]:
        """Agent devices and critic devices; critics follow the agents unless given their own."""
        agents = DeviceScheduler.resolve_devices(agent_devices, num_agents, kind="agent_devices")
        if not use_separate_critic:
            return agents, list(agents)
        spec = critic_devices if critic_devices is not None else agent_devices
        return agents, DeviceScheduler.resolve_devices(spec, num_agents, kind="critic_devices")

    @staticmethod
    def assign_shared_critic_device(
        agent_devices: Sequence[torch.device], critic_devices: DeviceSpec | None
    ) -> torch.device:
        """The one shared critic's device: ``critic_devices`` when set, else the first agent's."""
        if critic_devices is None:
            return agent_devices[0]
        return DeviceScheduler.resolve_devices(critic_devices, 1, kind="critic_devices")[0]
