"""The rollout half of a trainer: sampling settings, per-agent generation through the rollout
backend, reward scoring and multi-turn trees.

:class:`RolloutSteps` is part of :class:`comlrl.core.trainer.TrainerBase`; it reads the
trainer's ``args``, ``num_agents``, ``formatters``, ``external_transition``, ``reward_caller``,
``rollout_backend``, ``workers``, ``timing``, ``dist`` and ``epoch``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from comlrl.core.distributed import item_seed
from comlrl.core.rewards.shapes import RewardScores
from comlrl.core.rollout.generation import PromptSamples, SamplingParams
from comlrl.core.rollout.tree import TreeSettings, build_trees


class RolloutSteps:
    """Generation, scoring and rollout trees for the family's ``collect``."""

    def sampling_params(self, overrides: dict | None = None, *, eval_mode: bool = False):
        """Sampling settings from the config (plus ``train(**kwargs)`` overrides)."""
        a = self.args
        return SamplingParams(
            max_new_tokens=a.max_new_tokens,
            temperature=a.temperature,
            top_p=a.top_p,
            top_k=a.top_k,
            min_p=a.min_p,
            repetition_penalty=a.repetition_penalty,
            max_prompt_length=a.max_prompt_length,
            do_sample=not (eval_mode and a.eval_greedy),
            extra=dict(overrides or {}),
        )

    def generate_per_agent(
        self,
        prompts_per_agent: list[list[str]],
        num_samples: int,
        params: SamplingParams,
        keys: list[tuple] | None = None,
    ) -> list[list[PromptSamples]]:
        """Each agent samples ``num_samples`` completions for each of its prompts, in one
        batched backend call per agent (concurrently across devices in mp mode). With ``keys``
        (one per prompt), each prompt is seeded from (seed, epoch, key, agent) only, so its
        samples depend neither on batch composition nor on the rank that rolls it out. The
        time and the generated tokens count towards ``timing/generate`` and the throughput."""
        seed = self.args.seed or 0
        epoch = getattr(self, "epoch", 0)

        def run(i: int, prompts: list[str]) -> list[PromptSamples]:
            seeds = None if keys is None else [item_seed(seed, epoch, *k, i) for k in keys]
            return self.rollout_backend.generate(i, prompts, num_samples, params, seeds)

        with self.timed("generate"):
            out = self.workers.map(run, prompts_per_agent)
        self.timing.add_tokens(sum(s.num_tokens for agent in out for s in agent))
        return out

    def reward_scores(self, agent_completions, *, prompts, batch_items) -> RewardScores:
        """Rewards for a batch of joint actions, shared or per agent (timed as
        ``timing/reward``); the rollout tree stores them."""
        with self.timed("reward"):
            return self.reward_caller.score(
                agent_completions, prompts=prompts, batch_items=batch_items
            )

    def score(self, agent_completions, *, prompts, batch_items) -> list:
        """Rewards for a batch of joint actions: one value per joint action, or one row of
        per-agent values per joint action when the reward gives them."""
        return self.reward_scores(
            agent_completions, prompts=prompts, batch_items=batch_items
        ).as_output()

    def rollout(
        self,
        items: Sequence[dict],
        num_samples: int,
        params: SamplingParams,
        *,
        joint_mode: str = "aligned",
        early_termination_threshold=None,
        env_step_start: int = 0,
        offset: int | None = None,
    ):
        """Multi-turn rollout trees for ``items`` (see :mod:`comlrl.core.rollout.tree`).

        ``offset`` is the global index of ``items[0]`` during training (None for evaluation):
        it keys item-seeded sampling and turns rank-local env steps into global ones.
        """
        a = self.args
        settings = TreeSettings(
            num_agents=self.num_agents,
            num_turns=a.num_turns,
            num_samples=num_samples,
            joint_mode=joint_mode,
            early_termination_threshold=early_termination_threshold,
            discount=a.discount,
            external_prompt_passthrough=a.external_prompt_passthrough,
        )
        keyed = offset is not None and a.item_seeded_sampling

        def generate(prompts, keys=None):
            return self.generate_per_agent(prompts, num_samples, params, keys)

        world = self.dist.world_size if offset is not None else 1
        roots = build_trees(
            items,
            settings,
            self.formatters,
            generate,
            self.reward_scores,
            self.external_transition,
            env_step_start=0,
            item_offset=offset or 0,
            keyed=keyed,
        )
        # Ranks advance in lockstep over equal shards, so a node's global env step is its
        # rank-local count times the world size (identical on every rank; world 1: unchanged).
        for root in roots:
            for node in root.walk():
                node.env_step = env_step_start + node.env_step * world
        return roots

    def rollout_unit(self, unit, joint_mode: str = "aligned"):
        """The training rollout of an item batch (its items, from the current env step, K =
        ``num_generations``); advances ``env_step`` and records the batch's mean reward.
        Returns (roots, every node in walk order)."""
        a = self.args
        roots = self.rollout(
            unit.items,
            a.num_generations,
            self.sampling_params(self.generation_kwargs),
            joint_mode=joint_mode,
            early_termination_threshold=a.early_termination_threshold,
            env_step_start=self.env_step,
            offset=unit.offset,
        )
        nodes = [node for root in roots for node in root.walk()]
        self.env_step = max(n.env_step for n in nodes)
        self._last_reward_mean = float(np.mean([r for n in nodes for r in n.rewards]))
        return roots, nodes
