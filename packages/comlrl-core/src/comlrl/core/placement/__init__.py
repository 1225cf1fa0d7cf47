"""Where a run's agents run: the device plan with its agent workers (which agents a run trains,
their model sources, is :func:`comlrl.core.models.resolve_agents`).

:mod:`.devices` holds the device plans themselves (which device each agent, critic, reward or
reference model lives on) and the persistent per-agent workers of ``parallel_training="mp"``.
"""

from __future__ import annotations

from typing import Any

import torch

from comlrl.core.distributed import DistributedContext
from comlrl.core.placement.devices import (
    AgentWorkers,
    IndexedWorkers,
    plan_devices,
    uses_parallel_workers,
)


def plan_workers(args: Any, dist: DistributedContext, num_agents: int) -> tuple[list, Any, list]:
    """(device per agent, the agent workers, one process group per worker or none).

    Under a multi-process launch each rank trains on its own GPU unless ``agent_devices``
    places the agents; concurrent agent workers there get a process group each, so their
    collectives never interleave.
    """
    devices = plan_devices(args.parallel_training, args.agent_devices, num_agents)
    if dist.is_distributed and args.agent_devices is None and torch.cuda.is_available():
        devices = [torch.device("cuda", dist.local_rank)] * num_agents
    parallel = uses_parallel_workers(args.parallel_training, devices)
    if dist.is_distributed and parallel and num_agents > 1:
        groups = [torch.distributed.new_group() for _ in range(num_agents)]
        return devices, IndexedWorkers(num_agents, True), groups
    return devices, AgentWorkers(num_agents, parallel), []
