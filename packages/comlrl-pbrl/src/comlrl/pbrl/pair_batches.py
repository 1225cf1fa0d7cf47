"""How a DPO update groups its pairs under a token budget.

A pair contributes a winner row and a loser row per actor, and rows repeat across the pairs of
an update (the best candidate of an item often wins several pairs; an actor may write the same
text in both candidates). The log-prob engine (:func:`comlrl.core.logprobs.token_logprobs`) scores each
distinct ``(prompt, completion)`` row of a group once and indexes its log-prob by every pair
that uses it, so its gradient sums over those pairs.

The joint DPO loss is a mean over pairs of a function of each pair's own margin, so it splits
exactly over any grouping of the pairs: a group's pairs can be scored with gradients, their
share of the loss (``len(group) / len(pairs)`` times the group's mean) backpropagated at once,
and the next group scored after. No pass without gradients is needed to find the margins first.
Groups are cut so that every actor's distinct rows fit ``logprob_max_tokens`` padded tokens in
all, visiting pairs by length. Within a group the engine runs an actor's rows packed end to end
where the model allows it and that is cheaper, and otherwise as a few padded forwards of similar
lengths (:func:`~comlrl.core.logprobs.padding_aware_micro_batches`); the graphs of a group's
forwards are held until its backward, and together stay within the budget.
"""

from __future__ import annotations

from collections.abc import Sequence

from comlrl.core.logprobs import padded_tokens, padding_aware_micro_batches


def pair_groups(pairs: Sequence, max_tokens: int | None) -> list[list[int]]:
    """Pair indices grouped so each actor's distinct rows of a group fit ``max_tokens`` padded
    tokens in all, split into forwards as the log-prob engine splits padded rows. Pairs are visited by
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

    everything = [{k: v for pair in pairs for k, v in rows_of(pair, i).items()} for i in actors]
    if all(fits(rows) for rows in everything):
        # A budget that does not bind changes nothing: one group, in the pairs' own order.
        return [list(range(len(pairs)))]
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
