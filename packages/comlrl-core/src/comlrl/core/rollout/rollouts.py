"""A trainer's rollouts: sampling settings, per-agent generation through the rollout backend,
reward scoring and multi-turn trees, as functions of the trainer they sample for.

Each reads the trainer at the time of the call (families replace some of these after the base
setup): ``args``, ``num_agents``, ``formatters``, ``external_transition``, ``reward_caller``,
``rollout_backend``, ``workers``, ``timing``, ``dist``, ``generation_kwargs`` and the run
state; a training rollout (:func:`unit_trees`) advances the run's step count and tells
``reporting`` its mean reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from comlrl.core.distributed import item_seed
from comlrl.core.rewards.shapes import RewardScores
from comlrl.core.rollout.generation import PromptSamples, SamplingParams
from comlrl.core.rollout.tree import TreeNode, TreeSettings, build_trees

if TYPE_CHECKING:
    from comlrl.core.trainer import TrainerBase


def sampling_params(
    trainer: TrainerBase, overrides: dict | None = None, *, eval_mode: bool = False
) -> SamplingParams:
    """Sampling settings from the trainer's config (plus ``train(**kwargs)`` overrides)."""
    return SamplingParams.from_config(trainer.args, overrides, eval_mode=eval_mode)


def generate_per_agent(
    t: TrainerBase,
    prompts_per_agent: list[list[str]],
    num_samples: int,
    params: SamplingParams,
    keys: list[tuple] | None = None,
) -> list[list[PromptSamples]]:
    """Each agent samples ``num_samples`` completions for each of its prompts, in one
    batched backend call per agent (concurrently across devices in mp mode), or in the
    backend's ``generate_joint`` when it has one and can serve the request. With ``keys``
    (one per prompt), each prompt is seeded from (seed, epoch, key, agent) only, so its
    samples depend neither on batch composition nor on the rank that rolls it out. The
    time and the generated tokens count towards ``timing/generate`` and the throughput."""
    seed = t.args.seed or 0
    epoch = t.run_state.epoch

    def run(i: int, prompts: list[str]) -> list[PromptSamples]:
        seeds = None if keys is None else [item_seed(seed, epoch, *k, i) for k in keys]
        return t.rollout_backend.generate(i, prompts, num_samples, params, seeds)

    # A backend that can sample every agent in one go (adapters of one base, say) is
    # asked first; None means agent by agent.
    joint = getattr(t.rollout_backend, "generate_joint", None)
    with t.timing.phase("generate"):
        out = None
        if keys is None and joint is not None:
            out = joint(prompts_per_agent, num_samples, params)
        if out is None:
            out = t.workers.map(run, prompts_per_agent)
    t.timing.add_tokens(sum(s.num_tokens for agent in out for s in agent))
    return out


def reward_scores(t: TrainerBase, agent_completions, *, prompts, batch_items) -> RewardScores:
    """Rewards for a batch of joint actions, shared or per agent (timed as
    ``timing/reward``); the rollout tree stores them."""
    with t.timing.phase("reward"):
        return t.reward_caller.score(agent_completions, prompts=prompts, batch_items=batch_items)


def score(trainer: TrainerBase, agent_completions, *, prompts, batch_items) -> list:
    """Rewards for a batch of joint actions: one value per joint action, or one row of
    per-agent values per joint action when the reward gives them."""
    return reward_scores(
        trainer, agent_completions, prompts=prompts, batch_items=batch_items
    ).as_output()


def trees(
    t: TrainerBase,
    items: Sequence[dict],
    num_samples: int,
    params: SamplingParams,
    *,
    joint_mode: str = "aligned",
    early_termination_threshold=None,
    first_step: int = 0,
    offset: int | None = None,
) -> list[TreeNode]:
    """Multi-turn rollout trees for ``items`` (see :mod:`comlrl.core.rollout.tree`).

    ``offset`` is the global index of ``items[0]`` during training (None for evaluation):
    it keys item-seeded sampling and turns rank-local env steps into global ones.
    """
    a = t.args
    settings = TreeSettings(
        num_agents=t.num_agents,
        num_turns=a.num_turns,
        num_samples=num_samples,
        joint_mode=joint_mode,
        early_termination_threshold=early_termination_threshold,
        discount=a.discount,
        external_prompt_passthrough=a.external_prompt_passthrough,
    )
    keyed = offset is not None and a.item_seeded_sampling

    def generate(prompts, keys=None):
        # Looked up per call: a wrapper put in this module's ``generate_per_agent`` sees every
        # sample.
        return generate_per_agent(t, prompts, num_samples, params, keys)

    world = t.dist.world_size if offset is not None else 1
    roots = build_trees(
        items,
        settings,
        t.formatters,
        generate,
        partial(reward_scores, t),
        t.external_transition,
        first_step=0,
        item_offset=offset or 0,
        keyed=keyed,
    )
    # Ranks advance in lockstep over equal shards, so a node's global env step is its
    # rank-local count times the world size (identical on every rank; world 1: unchanged).
    for root in roots:
        for node in root.walk():
            node.step = first_step + node.step * world
    return roots


def unit_trees(t: TrainerBase, unit, joint_mode: str = "aligned") -> tuple[list, list]:
    """The training rollout of an item batch (its items, from the current env step, K =
    ``num_generations``); advances the run's step count and records the batch's mean reward for
    the progress bar. Returns (roots, every node in walk order)."""
    a = t.args
    roots = trees(
        t,
        unit.items,
        a.num_generations,
        sampling_params(t, t.generation_kwargs),
        joint_mode=joint_mode,
        early_termination_threshold=a.early_termination_threshold,
        first_step=t.run_state.environment_steps,
        offset=unit.offset,
    )
    nodes = [node for root in roots for node in root.walk()]
    t.run_state.advance(max(n.step for n in nodes) - t.run_state.environment_steps)
    t.reporting.last_reward_mean = float(np.mean([r for n in nodes for r in n.rewards]))
    return roots, nodes
