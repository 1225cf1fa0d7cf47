"""ReMax's greedy baseline: one extra greedy joint rollout per tree node, scored by the reward.

The baseline of a node is the reward of the joint action that every agent's greedy (argmax)
completion forms at that node's prompts. It does not depend on the sampled actions, so the
policy gradient stays unbiased. In a multi-turn tree only the greedy action's immediate reward
is measured (its later turns are not rolled out), which is still a valid, action-independent
baseline for the node's returns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from comlrl.core.rollout.tree import TreeNode

PHASE = "greedy_baseline"


def greedy_baselines(trainer: Any, nodes: Sequence[TreeNode]) -> list[float]:
    """The reward of each node's greedy joint response, in ``nodes`` order.

    One batched backend call per agent and one reward call for all nodes; the time is logged
    as ``timing/greedy_baseline`` (and, like every generation, in ``timing/generate`` and the
    throughput's token count)."""
    if not nodes:
        return []
    params = dataclasses.replace(
        trainer.sampling_params(trainer.generation_kwargs), do_sample=False
    )
    with trainer.timed(PHASE):
        prompts = [[node.prompts[i] for node in nodes] for i in range(trainer.num_agents)]
        samples = trainer.generate_per_agent(prompts, 1, params)
        completions = [[s.texts[0] for s in agent] for agent in samples]
        rewards = trainer.score(
            completions,
            prompts=[node.raw_prompts[0] for node in nodes],
            batch_items=[node.item for node in nodes],
        )
    return [float(r) for r in rewards]
