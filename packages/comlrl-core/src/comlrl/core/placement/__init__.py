"""Which agents a run trains and where they run: model sources checked against the counts the
caller and the config give, and the device plan with its agent workers.

:mod:`.devices` holds the device plans themselves (which device each agent, critic, reward or
reference model lives on) and the persistent per-agent workers of ``parallel_training="mp"``.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from comlrl.core.distributed import DistributedContext
from comlrl.core.models import infer_model_name, resolve_model_sources
from comlrl.core.placement.devices import (
    AgentWorkers,
    IndexedWorkers,
    plan_devices,
    uses_parallel_workers,
)


def resolve_agents(inputs: Any, args: Any) -> tuple[list, str]:
    """The agents' model sources (one per agent) and the run's model name, after checking the
    agent and tokenizer counts against ``inputs.num_agents`` and ``args.num_agents``."""
    num_agents, agents, tokenizer = inputs.num_agents, inputs.agents, inputs.tokenizer
    sources = resolve_model_sources(inputs.agent_model, agents, num_agents)
    count = len(sources)
    if agents is not None and inputs.agent_model is None and num_agents not in (None, count):
        raise ValueError(f"num_agents ({num_agents}) does not match len(agents) ({count}).")
    if args.num_agents is not None and args.num_agents != count:
        raise ValueError(
            f"args.num_agents ({args.num_agents}) does not match the number of agents "
            f"({count}); set the config's num_agents to {count}."
        )
    if tokenizer is None and not all(isinstance(s, (str, os.PathLike)) for s in sources):
        raise ValueError("Tokenizer(s) must be provided when agents are model objects.")
    if isinstance(tokenizer, (list, tuple)) and len(tokenizer) != count:
        raise ValueError(f"tokenizers length ({len(tokenizer)}) must match agents ({count}).")
    return sources, infer_model_name(sources[0])


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
