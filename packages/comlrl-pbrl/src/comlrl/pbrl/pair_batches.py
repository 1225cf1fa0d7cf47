"""How a DPO update scores its pairs: distinct rows once, pairs grouped under a token budget.

A pair contributes a winner row and a loser row per actor, and rows repeat across the pairs of
an update (the best candidate of an item often wins several pairs; an actor may write the same
text in both candidates). Each distinct ``(prompt, completion)`` row of a group is scored once
and its log-prob indexed by every pair that uses it, so its gradient sums over those pairs.

The joint DPO loss is a mean over pairs of a function of each pair's own margin, so it splits
exactly over any grouping of the pairs: a group's pairs can be scored with gradients, their
share of the loss (``len(group) / len(pairs)`` times the group's mean) backpropagated at once,
and the next group scored after. No pass without gradients is needed to find the margins first.
Groups are cut so that every actor's distinct rows fit ``logprob_max_tokens`` padded tokens in
all, visiting pairs by length. A winner and its loser often differ much in length, so an actor's
rows of a group run packed end to end (:mod:`comlrl.core.packing`) where the model allows it and
that is cheaper, and otherwise as a few padded forwards of similar lengths rather than one
padded to the longest (:func:`~comlrl.core.logprobs.padding_aware_micro_batches`); the graphs of
a group's forwards are held until its backward, and together stay within the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from comlrl.core.logprobs import (
    padded_tokens,
    padding_aware_micro_batches,
)
from comlrl.core.packing import plan_forwards


@dataclass
class ActorRows:
    """One actor's distinct rows of a group, and where each pair's winner and loser sit."""

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    winner_rows: list[int]
    loser_rows: list[int]


def distinct_rows(
    prompt_ids: Sequence[Sequence[int]],
    winner_ids: Sequence[Sequence[int]],
    loser_ids: Sequence[Sequence[int]],
) -> ActorRows:
    """The distinct ``(prompt, completion)`` rows of winners and losers (one actor)."""
    seen: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    prompts: list[list[int]] = []
    comps: list[list[int]] = []

    def row(p: Sequence[int], c: Sequence[int]) -> int:
        key = (tuple(p), tuple(c))
        index = seen.get(key)
        if index is None:
            index = seen[key] = len(prompts)
            prompts.append(list(p))
            comps.append(list(c))
        return index

    winners = [row(p, c) for p, c in zip(prompt_ids, winner_ids)]
    losers = [row(p, c) for p, c in zip(prompt_ids, loser_ids)]
    return ActorRows(prompts, comps, winners, losers)


def pair_groups(pairs: Sequence, max_tokens: int | None) -> list[list[int]]:
    """Pair indices grouped so each actor's distinct rows of a group fit ``max_tokens`` padded
    tokens in all, split into forwards as :func:`row_logps` splits them. Pairs are visited by
    their longest completion; a pair too long for the budget on its own forms a group alone.
    None: one group of every pair."""
    if not pairs:
        return []
    if not max_tokens:
        return [list(range(len(pairs)))]
    actors = range(pairs[0].num_actors)

    def rows_of(pair, i) -> dict:
        p = tuple(pair.prompt_ids[i])
        return {
            (p, tuple(pair.winner_ids[i])): (len(p), len(pair.winner_ids[i])),
            (p, tuple(pair.loser_ids[i])): (len(p), len(pair.loser_ids[i])),
        }

    def fits(rows: dict) -> bool:
        prompts = [p for p, _ in rows.values()]
        comps = [c for _, c in rows.values()]
        groups = padding_aware_micro_batches(prompts, comps, max_tokens)
        return padded_tokens(groups, prompts, comps) <= max_tokens

    def longest(j: int) -> tuple[int, int]:
        per_actor = [max(len(pairs[j].winner_ids[i]), len(pairs[j].loser_ids[i])) for i in actors]
        return max(per_actor), sum(per_actor)

    groups: list[list[int]] = []
    group: list[int] = []
    rows: list[dict] = [{} for _ in actors]
    for j in sorted(range(len(pairs)), key=longest):
        grown = [{**rows[i], **rows_of(pairs[j], i)} for i in actors]
        if group and not all(fits(g) for g in grown):
            groups.append(group)
            group = []
            grown = [rows_of(pairs[j], i) for i in actors]
        group.append(j)
        rows = grown
    groups.append(group)
    return groups


def row_logps(
    model, prompt_ids: list[list[int]], completion_ids: list[list[int]], pad_id: int, max_tokens
) -> torch.Tensor:
    """Summed completion log-probs ``[rows]`` in the given row order, from forwards of at most
    ``max_tokens`` tokens: packed rows (:func:`~comlrl.core.packing.plan_forwards`) when they are
    cheaper and the model takes them, else padded forwards of rows of similar length
    (:func:`~comlrl.core.logprobs.padding_aware_micro_batches`); gradients flow unless the
    caller disables them."""
    p_lens, c_lens = [len(p) for p in prompt_ids], [len(c) for c in completion_ids]
    groups, kernel = plan_forwards(model, p_lens, c_lens, max_tokens, pad_id)
    parts = []
    for idx in groups:
        lp = kernel(model, [prompt_ids[i] for i in idx], [completion_ids[i] for i in idx], pad_id)
        parts.append(lp.sequence_sum())
    values = torch.cat(parts)
    order = [i for idx in groups for i in idx]
    if order == list(range(len(order))):
        return values
    position = torch.empty(len(order), dtype=torch.long)
    position[torch.tensor(order)] = torch.arange(len(order))
    return values[position.to(values.device)]
