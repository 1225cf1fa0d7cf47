"""ReMax's greedy baseline: one extra greedy joint rollout per tree node, scored by the reward.

The baseline of a node is the reward of the joint action that every agent's greedy (argmax)
completion forms at that node's prompts. It does not depend on the sampled actions, so the
policy gradient stays unbiased. In a multi-turn tree only the greedy action's immediate reward
is measured (its later turns are not rolled out), which is still a valid, action-independent
baseline for the node's returns.

With per-agent rewards each agent's baseline is its own reward for the greedy joint response,
measured against its own returns; with a shared reward every agent gets the same value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from comlrl.core.rollout import rollouts
from comlrl.core.rollout.tree import TreeNode

PHASE = "greedy_baseline"


def greedy_baselines(trainer: Any, nodes: Sequence[TreeNode]) -> list[list[float]]:
    """The reward of each node's greedy joint response, in ``nodes`` order: one value per
    agent (``[node][agent]``), the shared reward repeated when rewards are not per agent.

    One batched backend call per agent and one reward call for all nodes; the time is logged
    as ``timing/greedy_baseline`` (and, like every generation, in ``timing/generate`` and the
    throughput's token count)."""
    if not nodes:
        return []
    params = dataclasses.replace(
        rollouts.sampling_params(trainer, trainer.generation_kwargs), do_sample=False
    )
    with trainer.timing.phase(PHASE):
        prompts = [[node.prompts[i] for node in nodes] for i in range(trainer.num_agents)]
        samples = rollouts.generate_per_agent(trainer, prompts, 1, params)
        completions = [[s.texts[0] for s in agent] for agent in samples]
        rewards = rollouts.score(
            trainer,
            completions,
            prompts=[node.raw_prompts[0] for node in nodes],
            batch_items=[node.item for node in nodes],
        )
    return [_per_agent(r, trainer.num_agents) for r in rewards]


def _per_agent(reward: Any, num_agents: int) -> list[float]:
    """One node's greedy reward as one value per agent (a shared value is repeated)."""
    if isinstance(reward, (list, tuple)):
        if len(reward) != num_agents:
            raise ValueError(
                f"the greedy baseline's reward has {len(reward)} values for {num_agents} "
                "agents; a per-agent reward gives one value per agent."
            )
        return [float(r) for r in reward]
    return [float(reward)] * num_agents
