"""Preference data from the current policy: candidates sampled per item, scored in one reward
call (raw and processed), ranked into pairs, and shared across ranks.

:class:`CandidatePairs` is part of :class:`~comlrl.pbrl.base.PreferenceTrainerBase`; it reads
the trainer's ``args``, ``formatters``, ``num_agents``, ``reward_caller``, ``reward_processor``,
``collaboration``, ``pair_rng`` and ``dist``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from comlrl.core.distributed import all_gather_objects, shard_range
from comlrl.core.rewards import RewardScores
from comlrl.core.rollout.generation import PromptSamples
from comlrl.pbrl.pairs import PreferencePair, candidate_pairs, select_pairs


class CandidatePairs:
    """Sampling, scoring and pairing of candidates; multi-process sharing of pairs."""

    # ------------------------------------------------------------------ rewards
    @property
    def reward_range(self):
        """The task reward's declared ``(low, high)`` range, or None."""
        if self.collaboration is not None:
            return self.collaboration.reward_range
        return self.reward_caller.reward_range

    def score_raw_and_processed(
        self, agent_completions, *, prompts, batch_items
    ) -> tuple[RewardScores, RewardScores]:
        """Raw and processed task rewards of a batch of joint actions, shared or per agent
        (one reward call; the raw ones feed the reward-distribution logs)."""
        with self.timed("reward"):
            return self.reward_caller.score_raw_and_processed(
                agent_completions, prompts=prompts, batch_items=batch_items
            )

    # ------------------------------------------------------------------ candidates
    def sample_candidates(
        self, items: Sequence[dict], num_samples: int, params
    ) -> list[list[PromptSamples]]:
        """``[actor][item]`` samples of the current policy for each item's prompts."""
        prompts = [[self.formatters[i](item) for item in items] for i in range(self.num_agents)]
        return self.rollouts.generate_per_agent(prompts, num_samples, params)

    def score_joint(
        self, texts: list[list[list[str]]], prompts: list[str], items: Sequence[dict]
    ) -> tuple[list[list[float]], list[list[float]]]:
        """Score aligned joint candidates in one reward call.

        ``texts[i][j][k]`` is actor ``i``'s ``k``-th candidate for item ``j``; candidate ``k`` of
        item ``j`` is the joint action ``(texts[0][j][k], ..., texts[N-1][j][k])``. Returns raw and
        processed rewards as ``[item][k]`` (per-agent rewards: the agents' means).
        """
        raw, processed, _ = self.score_joint_agents(texts, prompts, items)
        return raw, processed

    def score_joint_agents(self, texts, prompts, items):
        """:meth:`score_joint`, plus, when the reward gives each agent its own value, each
        agent's raw and processed rewards as ``[agent]`` of ``([item][k], [item][k])`` (None
        when shared). Per-agent processed means are the means of the processed values."""
        counts = [len(texts[0][j]) for j in range(len(items))]
        comps = [[t for j in range(len(items)) for t in texts[i][j]] for i in range(len(texts))]
        flat_prompts = [prompts[j] for j in range(len(items)) for _ in range(counts[j])]
        flat_items = [items[j] for j in range(len(items)) for _ in range(counts[j])]
        raw, processed = self.score_raw_and_processed(
            comps, prompts=flat_prompts, batch_items=flat_items
        )

        def per_item(values: list[float]) -> list[list[float]]:
            out, pos = [], 0
            for c in counts:
                out.append(values[pos : pos + c])
                pos += c
            return out

        agents = None
        if raw.per_agent:
            agents = [
                (per_item(raw.agent(i)), per_item(processed.agent(i)))
                for i in range(len(raw.rows[0]))
            ]
        return per_item(raw.shared), per_item(processed.shared), agents

    def build_policy_pairs(
        self, items: Sequence[dict], params
    ) -> tuple[list[PreferencePair], dict]:
        """Sample ``preference_num_candidates`` aligned joint candidates per item, score them and
        keep the selected non-tied pairs. Returns the pairs and generation statistics."""
        a = self.args
        k = a.preference_num_candidates
        per_call = a.rollout_batch_size or 1
        pairs: list[PreferencePair] = []
        rewards_seen: list[float] = []
        tied_items = 0
        for start in range(0, len(items), per_call):
            chunk = list(items[start : start + per_call])
            samples = self.sample_candidates(chunk, k, params)
            texts = [[s.texts for s in samples[i]] for i in range(self.num_agents)]
            prompts = [samples[0][j].prompt for j in range(len(chunk))]
            shared_raw, shared, agents = self.score_joint_agents(texts, prompts, chunk)
            # Shared rewards rank the joint candidates once; per-agent rewards rank them once
            # per agent, and each such pair trains only its agent (see PreferencePair.agent).
            rankings = [(None, shared_raw, shared)]
            if agents is not None:
                rankings = [(i, r, p) for i, (r, p) in enumerate(agents)]
            for j in range(len(chunk)):
                rewards_seen.extend(shared[j])
                found = 0
                for owner, raw, processed in rankings:
                    found += self._ranked_pairs(
                        pairs, samples, texts, j, owner, raw[j], processed[j]
                    )
                if not found:
                    tied_items += 1
        stats = {
            "preference/num_pairs": float(len(pairs)),
            "preference/candidate_reward_mean": float(np.mean(rewards_seen))
            if rewards_seen
            else float("nan"),
            "preference/tied_items": float(tied_items),
        }
        if self.collaboration is not None:
            stats.update(self.collaboration.stats())
        return pairs, stats

    def _ranked_pairs(self, pairs, samples, texts, j, owner, raw, rewards) -> int:
        """Append item ``j``'s selected pairs ranked by ``rewards``; return how many."""
        a = self.args
        chosen = select_pairs(
            candidate_pairs(rewards),
            a.pair_selection,
            a.preference_pairs_per_sample,
            self.pair_rng,
        )
        mean = float(np.mean(rewards))
        for w, lo, _gap in chosen:
            pairs.append(
                PreferencePair(
                    prompts=[samples[i][j].prompt for i in range(self.num_agents)],
                    winner_completions=[texts[i][j][w] for i in range(self.num_agents)],
                    loser_completions=[texts[i][j][lo] for i in range(self.num_agents)],
                    prompt_ids=[list(samples[i][j].prompt_ids) for i in range(self.num_agents)],
                    winner_ids=[
                        list(samples[i][j].completion_ids[w]) for i in range(self.num_agents)
                    ],
                    loser_ids=[
                        list(samples[i][j].completion_ids[lo]) for i in range(self.num_agents)
                    ],
                    winner_reward=rewards[w],
                    loser_reward=rewards[lo],
                    candidate_reward_mean=mean,
                    raw_rewards=[raw[w], raw[lo]],
                    agent=owner,
                )
            )
        return len(chosen)

    # ------------------------------------------------------------------ multi-process
    def rank_share(self, rows: Sequence[Any]) -> list[Any]:
        """This rank's contiguous share of ``rows`` (all of them in a single process)."""
        begin, end = shard_range(0, len(rows), self.dist)
        return list(rows[begin:end])

    def gather_pairs(
        self, pairs: list[PreferencePair], stats: dict[str, float], num_items: int
    ) -> tuple[list[PreferencePair], dict[str, float]]:
        """Every rank's pairs, in rank order (item order, as shards are contiguous), and the
        pair statistics over all of them; identical on every rank. ``num_items`` is how many
        items this rank sampled (it weights the means)."""
        if not self.dist.is_distributed:
            return pairs, stats
        parts = all_gather_objects((pairs, stats, num_items), self.dist)
        merged = [p for part, _, _ in parts for p in part]
        total_items = sum(n for _, _, n in parts)
        summed = ("preference/num_pairs", "preference/tied_items")
        out: dict[str, float] = {}
        for key in stats:
            values = [(s[key], n) for _, s, n in parts if n]
            if key in summed:
                out[key] = float(sum(v for v, _ in values))
            elif total_items and values:
                out[key] = float(sum(v * n for v, n in values) / total_items)
            else:
                out[key] = float("nan")
        return merged, out

    def attach_reference_logps_sharded(self, pairs: Sequence[PreferencePair]) -> None:
        """:meth:`attach_reference_logps` for pairs every rank holds: each rank scores its
        share and the values are gathered (a single process scores them all)."""
        if not self.dist.is_distributed:
            self.attach_reference_logps(pairs)
            return
        mine = self.rank_share(pairs)
        self.attach_reference_logps(mine)
        parts = all_gather_objects([p.reference_logps for p in mine], self.dist)
        for pair, logps in zip(pairs, [v for part in parts for v in part]):
            pair.reference_logps = logps
