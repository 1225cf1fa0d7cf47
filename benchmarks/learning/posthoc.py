"""Score a trainer's current agents after training with any task's reward.

The same prompts, samples and seeds for every run of a task, so that the scores compare: each
agent samples ``samples_per_prompt`` completions per prompt with the training sampling
settings, seeded per prompt and agent, and sample ``k`` of every agent forms joint action ``k``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from comlrl.core.rollout import rollouts


def length_ratio_items() -> list[dict]:
    """The length-ratio scoring prompts: every built-in training topic, then the eval topics
    (24 prompts; the demo trains on the first 16)."""
    from comlrl.tasks import length_ratio

    topics = list(length_ratio._TOPICS) + list(length_ratio._EVAL_TOPICS)
    return length_ratio.dataset(len(topics), topics)


def default_items(trainer) -> list[dict]:
    """A trainer's training prompts followed by its held-out (eval) prompts."""
    return list(trainer.train_dataset or []) + list(trainer.eval_dataset or [])


def posthoc_score(
    trainer,
    items: Sequence[dict] | None = None,
    reward_func: Callable[..., Any] | None = None,
    samples_per_prompt: int = 8,
    seed: int = 12345,
) -> dict[str, float]:
    """Mean reward of ``trainer``'s agents over ``items`` x ``samples_per_prompt`` joint samples.

    ``items`` defaults to the trainer's training then eval prompts, ``reward_func`` to the
    trainer's own reward (pass the task's reward when training used a shaped or weighted one).
    The reward is called like in training (dispatched by its signature, one shared value or
    one per agent per joint action); per-agent values count as their mean.
    """
    from comlrl.core.rewards import RewardCaller

    if samples_per_prompt < 1:
        raise ValueError(f"samples_per_prompt must be at least 1, got {samples_per_prompt}.")
    items = list(items) if items is not None else default_items(trainer)
    if not items:
        raise ValueError("items: no prompts to score; give items or a trainer with a dataset.")
    collaboration = getattr(trainer, "collaboration", None)
    if collaboration is not None:
        texts, fractions = centralized_texts(
            trainer, collaboration, items, samples_per_prompt, seed
        )
        num_agents = collaboration.num_roles
    else:
        texts, fractions = agent_texts(trainer, items, samples_per_prompt, seed), None
        num_agents = trainer.num_agents
    joint_items = [item for item in items for _ in range(samples_per_prompt)]
    first_prompt = (
        collaboration.role_formatters[0] if collaboration is not None else trainer.formatters[0]
    )
    prompts = [first_prompt(item) for item in joint_items]
    if collaboration is not None and reward_func in (None, collaboration):
        # the writer's trainer rewards joint texts; the roles are scored by the task's reward
        reward_func = collaboration.task_reward
    elif reward_func is None:
        reward_func = trainer.reward_func
    caller = RewardCaller(reward_func, num_agents=num_agents)
    rewards = caller.score(texts, prompts=prompts, batch_items=joint_items).shared
    out = {"posthoc_reward": statistics.mean(rewards), "posthoc_samples": float(len(rewards))}
    for agent, samples in enumerate(texts):
        out[f"posthoc_len_agent{agent}"] = statistics.mean(len(t) for t in samples)
    if fractions is not None:
        out["posthoc_complete_layouts"] = statistics.mean(f == 1.0 for f in fractions)
        out["posthoc_credited_reward"] = statistics.mean(r * f for r, f in zip(rewards, fractions))
    return out


def agent_texts(trainer, items: Sequence[dict], samples_per_prompt: int, seed: int):
    """``[agent][j]``: each agent's samples, sample ``k`` of prompt ``p`` at ``p * K + k``."""
    from comlrl.core.distributed import item_seed

    params = rollouts.sampling_params(trainer)
    texts: list[list[str]] = []
    for agent in range(trainer.num_agents):
        prompts = [trainer.formatters[agent](item) for item in items]
        seeds = [item_seed(seed, j, agent) for j in range(len(items))]
        out = trainer.rollout_backend.generate(agent, prompts, samples_per_prompt, params, seeds)
        texts.append([t for samples in out for t in samples.texts])
    return texts


def centralized_texts(trainer, collaboration, items, samples_per_prompt: int, seed: int):
    """The one writer's joint samples split into ``[role][j]`` outputs (a missing role is an
    empty answer), with each sample's produced share of the layout."""
    from comlrl.core.distributed import item_seed

    prompts = [trainer.formatters[0](item) for item in items]
    seeds = [item_seed(seed, j, 0) for j in range(len(items))]
    out = trainer.rollout_backend.generate(
        0, prompts, samples_per_prompt, rollouts.sampling_params(trainer), seeds
    )
    joint = [t for samples in out for t in samples.texts]
    owners = [item for item in items for _ in range(samples_per_prompt)]
    # scoring after training must not feed the training records' parse-failure rates
    recording, collaboration.recording = collaboration.recording, lambda: False
    try:
        roles = collaboration.split_many(joint, owners)
    finally:
        collaboration.recording = recording
    return roles, list(collaboration.last_fractions)
