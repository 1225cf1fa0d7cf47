"""Preference data from the current policy: candidates sampled per item, scored in one reward
call (raw and processed, by the trainer's reward caller), ranked into pairs, and shared across
ranks.

Plain functions of the preference trainer: they read its ``args``, ``formatters``,
``num_agents``, ``rollouts``, ``reward_caller``, ``collaboration``, ``pair_rng`` and ``dist``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from comlrl.core.distributed import all_gather_objects, shard_range
from comlrl.core.rollout import rollouts
from comlrl.core.rollout.generation import PromptSamples
from comlrl.pbrl.pairs import PreferencePair, candidate_pairs, select_pairs


def sample_candidates(
    trainer: Any, items: Sequence[dict], num_samples: int, params
) -> list[list[PromptSamples]]:
    """``[actor][item]`` samples of the current policy for each item's prompts."""
    t = trainer
    prompts = [[t.formatters[i](item) for item in items] for i in range(t.num_agents)]
    return rollouts.generate_per_agent(t, prompts, num_samples, params)


def score_joint_agents(trainer: Any, texts, prompts, items):
    """Score aligned joint candidates in one reward call.

    ``texts[i][j][k]`` is actor ``i``'s ``k``-th candidate for item ``j``; candidate ``k`` of
    item ``j`` is the joint action ``(texts[0][j][k], ..., texts[N-1][j][k])``. Returns raw and
    processed rewards as ``[item][k]`` (per-agent rewards: the agents' means), and, when the
    reward gives each agent its own value, each agent's raw and processed rewards as ``[agent]``
    of ``([item][k], [item][k])`` (None when shared). The reward caller processes the rewards;
    per-agent processed means are the means of the processed values."""
    counts = [len(texts[0][j]) for j in range(len(items))]
    comps = [[x for j in range(len(items)) for x in texts[i][j]] for i in range(len(texts))]
    flat_prompts = [prompts[j] for j in range(len(items)) for _ in range(counts[j])]
    flat_items = [items[j] for j in range(len(items)) for _ in range(counts[j])]
    with trainer.timing.phase("reward"):
        raw, processed = trainer.reward_caller.score_raw_and_processed(
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
            (per_item(raw.agent(i)), per_item(processed.agent(i))) for i in range(len(raw.rows[0]))
        ]
    return per_item(raw.shared), per_item(processed.shared), agents


def build_policy_pairs(
    trainer: Any, items: Sequence[dict], params
) -> tuple[list[PreferencePair], dict]:
    """Sample ``preference_num_candidates`` aligned joint candidates per item, score them and
    keep the selected non-tied pairs. Returns the pairs and generation statistics."""
    t = trainer
    a = t.args
    k = a.preference_num_candidates
    per_call = a.rollout_batch_size or 1
    pairs: list[PreferencePair] = []
    rewards_seen: list[float] = []
    tied_items = 0
    for start in range(0, len(items), per_call):
        chunk = list(items[start : start + per_call])
        samples = sample_candidates(t, chunk, k, params)
        texts = [[s.texts for s in samples[i]] for i in range(t.num_agents)]
        prompts = [samples[0][j].prompt for j in range(len(chunk))]
        shared_raw, shared, agents = score_joint_agents(t, texts, prompts, chunk)
        # Shared rewards rank the joint candidates once; per-agent rewards rank them once
        # per agent, and each such pair trains only its agent (see PreferencePair.agent).
        rankings = [(None, shared_raw, shared)]
        if agents is not None:
            rankings = [(i, r, p) for i, (r, p) in enumerate(agents)]
        for j in range(len(chunk)):
            rewards_seen.extend(shared[j])
            found = 0
            for owner, raw, processed in rankings:
                found += _ranked_pairs(t, pairs, samples, texts, j, owner, raw[j], processed[j])
            if not found:
                tied_items += 1
    stats = {
        "preference/num_pairs": float(len(pairs)),
        "preference/candidate_reward_mean": float(np.mean(rewards_seen))
        if rewards_seen
        else float("nan"),
        "preference/tied_items": float(tied_items),
    }
    if t.collaboration is not None:
        stats.update(t.collaboration.stats())
    return pairs, stats


def _ranked_pairs(t, pairs, samples, texts, j, owner, raw, rewards) -> int:
    """Append item ``j``'s selected pairs ranked by ``rewards``; return how many."""
    a = t.args
    n = t.num_agents
    chosen = select_pairs(
        candidate_pairs(rewards),
        a.pair_selection,
        a.preference_pairs_per_sample,
        t.pair_rng,
    )
    mean = float(np.mean(rewards))
    for w, lo, _gap in chosen:
        pairs.append(
            PreferencePair(
                prompts=[samples[i][j].prompt for i in range(n)],
                winner_completions=[texts[i][j][w] for i in range(n)],
                loser_completions=[texts[i][j][lo] for i in range(n)],
                prompt_ids=[list(samples[i][j].prompt_ids) for i in range(n)],
                winner_ids=[list(samples[i][j].completion_ids[w]) for i in range(n)],
                loser_ids=[list(samples[i][j].completion_ids[lo]) for i in range(n)],
                winner_reward=rewards[w],
                loser_reward=rewards[lo],
                candidate_reward_mean=mean,
                raw_rewards=[raw[w], raw[lo]],
                agent=owner,
            )
        )
    return len(chosen)


def rank_share(rows: Sequence[Any], dist) -> list[Any]:
    """This rank's contiguous share of ``rows`` (all of them in a single process)."""
    begin, end = shard_range(0, len(rows), dist)
    return list(rows[begin:end])


def gather_pairs(
    pairs: list[PreferencePair], stats: dict[str, float], num_items: int, dist
) -> tuple[list[PreferencePair], dict[str, float]]:
    """Every rank's pairs, in rank order (item order, as shards are contiguous), and the
    pair statistics over all of them; identical on every rank. ``num_items`` is how many
    items this rank sampled (it weights the means)."""
    if not dist.is_distributed:
        return pairs, stats
    parts = all_gather_objects((pairs, stats, num_items), dist)
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


def sample_policy_pairs(trainer: Any) -> tuple[list[PreferencePair], dict, int]:
    """This rank's pairs of the current policy: it samples and scores its share of the training
    items (through ``trainer.build_policy_pairs``). Returns the pairs, their statistics and how
    many items were sampled (what :func:`gather_pairs` weights by)."""
    t = trainer
    params = rollouts.sampling_params(t, t.generation_kwargs)
    items = rank_share(list(t.get_train_dataloader()), t.dist)
    pairs, stats = t.build_policy_pairs(items, params)
    return pairs, stats, len(items)
