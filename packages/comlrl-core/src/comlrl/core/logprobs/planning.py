"""How rows are grouped into forwards under a token budget, and which kernel runs each group.

A padded forward runs every row at the width of the longest prompt plus the longest completion,
so rows are visited by length before they are cut into groups; a group is cut when it would run
more than ``max_tokens`` tokens (None: no cap), and a row that alone exceeds the cap forms a
group of its own. :func:`plan` is the single choice the engine makes per call: rows sharing a
prompt encode it once (:func:`shared_prompt_micro_batches`), rows of very different lengths are
packed end to end where the model keeps packed sequences apart and :func:`packing_pays` says it
is cheaper (:func:`plan_forwards`), and everything else runs as length-sorted padded forwards.

Packing computes logits at every packed position, so it pays when the output head is cheap next
to the body and padding is large; the cost model prices both layouts by the weights of the body
and the head, plus a fixed price per forward.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from comlrl.core.logprobs.budget import token_budget
from comlrl.core.logprobs.kernels import (
    TokenLogprobs,
    completion_logprobs,
    packed_logprobs,
    packing_verified,
    prompt_sharing_ready,
    shared_prompt_logprobs,
)

Kernel = Callable[..., TokenLogprobs]

# How :func:`plan` groups rows; "auto" lets it choose.
LAYOUTS = ("auto", "shared_prompt", "packed", "padded")

# What one more padded forward (and its share of the backward) costs, in padded tokens, when
# the model is not known (:func:`padding_aware_micro_batches`' default); splitting pays when it
# saves more padding than this. :func:`forward_cost_tokens` prices it by the model's size.
FORWARD_COST_TOKENS = 64
# The fixed price of a forward (kernel launches, masks, Python) measured on CPU: about 250
# tokens of work for a 0.1M-parameter body and 100 for a 4.8M one, less for larger models;
# interpolated in log-log space between and beyond, and kept within the bounds.
_FORWARD_COST = ((1.0e5, 250.0), (4.8e6, 100.0))
_FORWARD_COST_BOUNDS = (16.0, 250.0)
# A packed forward pays more than a padded one of the same tokens: its attention runs with a
# block mask built per forward, and every position's hidden state is gathered before the head.
# Measured on the 0.1M-parameter test model (16 rows of 70-78 tokens), one packed forward cost
# 0.7-1.5 ms more than the padded forward it replaced, a quarter of a forward's fixed price.
PACKED_FORWARD_SURCHARGE = 0.25


def _check_lengths(prompt_lengths: Sequence, completion_lengths: Sequence) -> None:
    if len(prompt_lengths) != len(completion_lengths):
        raise ValueError(
            f"prompt_lengths and completion_lengths must have the same length, got "
            f"{len(prompt_lengths)} and {len(completion_lengths)}."
        )


def micro_batches_for(model: Any, lengths: Sequence[int], max_tokens: Any) -> Iterator[list[int]]:
    """:func:`micro_batches` of rows of ``lengths`` for forwards of ``model``, under
    ``logprob_max_tokens`` as resolved for that model (``"auto"`` reads its size, see
    :func:`~comlrl.core.logprobs.budget.token_budget`)."""
    return micro_batches(lengths, token_budget(max_tokens, model))


def micro_batches(lengths: Sequence[int], max_tokens: int | None) -> Iterator[list[int]]:
    """Split row indices into consecutive groups whose padded size stays under ``max_tokens``."""
    if not max_tokens:
        yield list(range(len(lengths)))
        return
    group: list[int] = []
    width = 0
    for i, n in enumerate(lengths):
        new_width = max(width, n)
        if group and new_width * (len(group) + 1) > max_tokens:
            yield group
            group, new_width = [], n
        group.append(i)
        width = new_width
    if group:
        yield group


def _by_length(prompt_lengths: Sequence[int], completion_lengths: Sequence[int]) -> list[int]:
    _check_lengths(prompt_lengths, completion_lengths)
    return sorted(
        range(len(prompt_lengths)), key=lambda i: (completion_lengths[i], prompt_lengths[i])
    )


def length_sorted_micro_batches(
    prompt_lengths: Sequence[int], completion_lengths: Sequence[int], max_tokens: int | None
) -> list[list[int]]:
    """Row indices grouped for :func:`~comlrl.core.logprobs.kernels.completion_logprobs`, with
    as little padding as possible.

    Rows are ordered by completion then prompt length, and cut into consecutive groups whose
    padded size (``(max prompt + max completion) x rows``) stays within ``max_tokens`` (None:
    one group). A loss that is a sum over rows is unchanged by the grouping; only the padded
    work shrinks.
    """
    order = _by_length(prompt_lengths, completion_lengths)
    if not max_tokens:
        return [order] if order else []
    groups: list[list[int]] = []
    group: list[int] = []
    p_max = c_max = 0
    for i in order:
        p, c = max(p_max, prompt_lengths[i]), max(c_max, completion_lengths[i], 1)
        if group and (p + c) * (len(group) + 1) > max_tokens:
            groups.append(group)
            group, p, c = [], prompt_lengths[i], max(completion_lengths[i], 1)
        group.append(i)
        p_max, c_max = p, c
    if group:
        groups.append(group)
    return groups


def padding_aware_micro_batches(
    prompt_lengths: Sequence[int],
    completion_lengths: Sequence[int],
    max_tokens: int | None,
    forward_cost: int | None = None,
) -> list[list[int]]:
    """:func:`length_sorted_micro_batches`, also cut where rows of very different lengths meet.

    A row starts a new group when adding it would exceed ``max_tokens`` padded tokens (None: no
    cap) or would add more than ``forward_cost`` tokens of padding to the group (its own and the
    other rows'), that is when a separate forward is cheaper than the padding. For rows whose
    lengths vary a lot (a preference pair's winner and loser) this removes most padding at the
    price of a few more, smaller forwards. ``forward_cost`` defaults to
    :data:`FORWARD_COST_TOKENS`.
    """
    if forward_cost is None:
        forward_cost = FORWARD_COST_TOKENS
    groups: list[list[int]] = []
    group: list[int] = []
    p_max = c_max = 0
    for i in _by_length(prompt_lengths, completion_lengths):
        p, c = prompt_lengths[i], max(completion_lengths[i], 1)
        p_new, c_new = max(p_max, p), max(c_max, c)
        if group:
            grown = (p_new + c_new) * (len(group) + 1)
            padding = grown - (p_max + c_max) * len(group) - (p + c)
            if (max_tokens and grown > max_tokens) or padding > forward_cost:
                groups.append(group)
                group, p_new, c_new = [], p, c
        group.append(i)
        p_max, c_max = p_new, c_new
    if group:
        groups.append(group)
    return groups


def padded_tokens(
    groups: Sequence[Sequence[int]],
    prompt_lengths: Sequence[int],
    completion_lengths: Sequence[int],
) -> int:
    """Padded tokens of ``groups`` as padded forwards run them (``(longest prompt + longest
    completion) x rows`` per group)."""
    return sum(
        (max(prompt_lengths[i] for i in g) + max(1, max(completion_lengths[i] for i in g))) * len(g)
        for g in groups
        if g
    )


def shared_prompt_micro_batches(
    prompt_ids: Sequence[Sequence[int]], completion_lengths: Sequence[int], max_tokens: int | None
) -> list[list[int]]:
    """Row groups for :func:`~comlrl.core.logprobs.kernels.shared_prompt_logprobs`: rows of one
    prompt stay together.

    Prompts are visited by their rows' longest completion, rows within a prompt by completion
    length; groups are cut where ``distinct prompts x longest prompt + rows x longest
    completion`` (the tokens the two passes run) would exceed ``max_tokens`` (None: one group).
    """
    if len(prompt_ids) != len(completion_lengths):
        raise ValueError(
            f"prompt_ids and completion_lengths must have the same length, got "
            f"{len(prompt_ids)} and {len(completion_lengths)}."
        )
    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(prompt_ids):
        by_prompt.setdefault(tuple(p), []).append(i)
    members = sorted(by_prompt.values(), key=lambda g: max(completion_lengths[i] for i in g))
    order = [i for g in members for i in sorted(g, key=lambda i: completion_lengths[i])]
    if not max_tokens:
        return [order] if order else []
    groups: list[list[int]] = []
    group: list[int] = []
    seen: set[tuple[int, ...]] = set()
    p_max = c_max = 0
    for i in order:
        key = tuple(prompt_ids[i])
        width, c = max(p_max, len(key)), max(c_max, completion_lengths[i], 1)
        prompts = len(seen | {key})
        if group and prompts * width + (len(group) + 1) * c > max_tokens:
            groups.append(group)
            group, seen, width, c = [], set(), len(key), max(completion_lengths[i], 1)
        group.append(i)
        seen.add(key)
        p_max, c_max = width, c
    if group:
        groups.append(group)
    return groups


def bins_first_fit(lengths: Sequence[int], width: int) -> list[list[int]]:
    """Indices grouped into bins of total length at most ``width``, longest first, each into
    the first bin with room (a length above ``width`` gets a bin of its own)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    bins: list[list[int]] = []
    room: list[int] = []
    for i in order:
        for b, free in enumerate(room):
            if lengths[i] <= free:
                bins[b].append(i)
                room[b] -= lengths[i]
                break
        else:
            bins.append([i])
            room.append(width - lengths[i])
    return bins


# Weight counts per model, kept while the model lives: the planner prices every log-prob call
# by them, and walking every parameter of the module tree each time was a visible share of a
# small model's update. The counts only price plans, so a model changed in place after its
# first plan keeps its first price.
_COUNTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _weight_counts(model) -> tuple[int, int, int, bool]:
    """``model``'s parameter count, its output head's and its input table's (0 where absent),
    and whether the two share one weight."""
    try:
        return _COUNTS[model]
    except KeyError:
        counts = _COUNTS[model] = _count_weights(model)
        return counts
    except TypeError:  # an object that cannot be weakly referenced: counted each time
        return _count_weights(model)


def _count_weights(model) -> tuple[int, int, int, bool]:
    head = model.get_output_embeddings()
    table = model.get_input_embeddings()
    tied = head is not None and table is not None and head.weight is table.weight
    return (
        sum(p.numel() for p in model.parameters()),
        head.weight.numel() if head is not None else 0,
        table.weight.numel() if table is not None else 0,
        tied,
    )


def _log_log(points, bounds, size: float) -> float:
    """A price measured at two model sizes ``points``, interpolated in log-log space at
    ``size`` and kept within ``bounds``."""
    (n0, c0), (n1, c1) = points
    slope = math.log(c1 / c0) / math.log(n1 / n0)
    low, high = bounds
    return min(high, max(low, c0 * (max(size, 1.0) / n0) ** slope))


def _body_size(model) -> int:
    total, head, _, tied = _weight_counts(model)
    return total if tied else total - head


def forward_cost_tokens(model) -> float:
    """The fixed price of one more forward of ``model`` on a CPU, in padded tokens (see
    :data:`_FORWARD_COST`); on other devices :data:`FORWARD_COST_TOKENS`, until measured there."""
    if next(model.parameters()).device.type != "cpu":
        return float(FORWARD_COST_TOKENS)
    return _log_log(_FORWARD_COST, _FORWARD_COST_BOUNDS, _body_size(model))


def packing_pays(
    model,
    padded: int,
    packed: int,
    completion_padded: int,
    padded_forwards: int = 1,
    packed_forwards: int = 1,
) -> bool:
    """Whether packed rows cost less than padded forwards.

    ``padded``: tokens the padded forwards run; ``packed``: tokens in packed rows;
    ``completion_padded``: the padded completion columns, the only ones the padded path runs
    through the output head; ``*_forwards``: how many forwards each layout takes, each priced
    at :func:`forward_cost_tokens` tokens of body work (a packed one at
    1 + :data:`PACKED_FORWARD_SURCHARGE` times that). Body and head are priced by their
    weights.
    """
    total, head_cost, table, tied = _weight_counts(model)
    body_cost = total - head_cost
    if not tied:  # an input table is a lookup, not a matmul
        body_cost -= table
    cost = forward_cost_tokens(model)
    padded += int(padded_forwards * cost)
    packed_body = packed + int(packed_forwards * cost * (1 + PACKED_FORWARD_SURCHARGE))
    return _packing_pays_for(body_cost, head_cost, padded, packed, completion_padded, packed_body)


def _packing_pays_for(
    body: int, head: int, padded: int, packed: int, completion: int, packed_body: int | None = None
) -> bool:
    packed_body = packed if packed_body is None else packed_body
    return packed_body * body + packed * head < padded * body + completion * head


def plan_forwards(
    model, prompt_lengths: Sequence[int], completion_lengths: Sequence[int], max_tokens, pad_id
) -> tuple[list[list[int]], Kernel]:
    """Packed or padded forwards of at most ``max_tokens`` tokens (None: no cap): the row
    groups, one forward each, and the kernel to call on each group's rows in the order given,
    ``kernel(model, prompt_ids, completion_ids, pad_id)``.

    The kernel is :func:`~comlrl.core.logprobs.kernels.packed_logprobs` (rows packed first-fit,
    longest first) when ``model`` keeps packed sequences apart (:func:`packing_verified`) and
    :func:`packing_pays` says it is cheaper; otherwise
    :func:`~comlrl.core.logprobs.kernels.completion_logprobs` over the groups of
    :func:`padding_aware_micro_batches`. Packed rows are as wide as the longest sequence, so a
    sequence longer than ``max_tokens`` keeps the padded forwards (where it runs alone).
    """
    padded_groups = padding_aware_micro_batches(
        prompt_lengths, completion_lengths, max_tokens, int(forward_cost_tokens(model))
    )
    padded_plan = (padded_groups, completion_logprobs)
    if not prompt_lengths or min(prompt_lengths) == 0:
        return padded_plan
    lengths = [p + c for p, c in zip(prompt_lengths, completion_lengths)]
    width = max(lengths)
    if max_tokens and width > max_tokens:
        return padded_plan
    bins = bins_first_fit(lengths, width)
    per_forward = len(bins) if not max_tokens else max_tokens // width
    groups = [
        [i for b in bins[k : k + per_forward] for i in b] for k in range(0, len(bins), per_forward)
    ]
    padded = padded_tokens(padded_groups, prompt_lengths, completion_lengths)
    completion_padded = sum(
        len(g) * max(1, max(completion_lengths[i] for i in g)) for g in padded_groups
    )
    cheaper = packing_pays(
        model, padded, len(bins) * width, completion_padded, len(padded_groups), len(groups)
    )
    if not cheaper or not packing_verified(model, pad_id):
        return padded_plan
    return groups, functools.partial(packed_logprobs, width=width)


# What the shared-prompt layout's second pass costs (the prompt pass, the cache gathered per row
# and both passes' backward), in tokens of padded work, measured on CPU for the test models
# (16 rows of 64 tokens over 4 prompts of ~14): about 690 tokens for a 0.1M-parameter body and 93
# for a 4.8M one. Between and beyond, the price is interpolated in log-log space (compute grows
# with the model, the fixed price far less) and kept within these bounds.
_SHARED_PASS_COST = ((1.0e5, 690.0), (4.8e6, 93.0))
_SHARED_PASS_BOUNDS = (8.0, 700.0)


def shared_pass_cost_tokens(model) -> float:
    """The extra price of a shared-prompt forward group on a CPU, in padded tokens, for
    ``model``'s size (see :data:`_SHARED_PASS_COST`)."""
    return _log_log(_SHARED_PASS_COST, _SHARED_PASS_BOUNDS, _body_size(model))


def sharing_pays(
    model,
    prompt_ids: Sequence[Sequence[int]],
    completion_lengths: Sequence[int],
    max_tokens,
    groups: list[list[int]] | None = None,
) -> bool:
    """Whether encoding each distinct prompt once (two passes per group) is cheaper than padded
    forwards over whole rows: the tokens each layout runs under the same budget, plus
    :func:`shared_pass_cost_tokens` per shared group. ``groups``: the shared-prompt groups when
    the caller has them (default: :func:`shared_prompt_micro_batches`). The price was measured
    on a CPU only; on other devices sharing is taken whenever a prompt repeats, until it is
    measured there."""
    if next(model.parameters()).device.type != "cpu":
        return True
    if groups is None:
        groups = shared_prompt_micro_batches(prompt_ids, completion_lengths, max_tokens)
    shared = sum(
        len({tuple(prompt_ids[i]) for i in g}) * max(len(prompt_ids[i]) for i in g)
        + len(g) * max(1, max(completion_lengths[i] for i in g))
        for g in groups
    )
    p_lens = [len(p) for p in prompt_ids]
    padded_groups = length_sorted_micro_batches(p_lens, completion_lengths, max_tokens)
    padded = padded_tokens(padded_groups, p_lens, completion_lengths)
    return shared + len(groups) * shared_pass_cost_tokens(model) < padded


def plan(
    model,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    max_tokens: int | None,
    pad_id: int,
    layout: str = "auto",
) -> tuple[list[list[int]], Kernel]:
    """The row groups (one forward each, at most ``max_tokens`` tokens unless a row alone is
    longer) and the kernel that scores each group's rows in the order given.

    ``layout``: ``"shared_prompt"`` (rows of one prompt together,
    :func:`~comlrl.core.logprobs.kernels.shared_prompt_logprobs`), ``"packed"``
    (:func:`plan_forwards`: packed rows where they are verified and cheaper, else padding-aware
    padded forwards), ``"padded"`` (:func:`length_sorted_micro_batches` with
    :func:`~comlrl.core.logprobs.kernels.completion_logprobs`), or ``"auto"``: shared prompts
    when some prompt repeats, the model can take a prompt cache and :func:`sharing_pays`,
    else ``"packed"``. A model
    that cannot take a prompt cache gets ``"padded"`` for ``"shared_prompt"``.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {layout!r}.")
    c_lens = [len(c) for c in completion_ids]
    if layout == "auto":
        repeated = len({tuple(p) for p in prompt_ids}) < len(prompt_ids)
        if repeated and prompt_sharing_ready(model):
            groups = shared_prompt_micro_batches(prompt_ids, c_lens, max_tokens)
            if sharing_pays(model, prompt_ids, c_lens, max_tokens, groups):
                return groups, shared_prompt_logprobs
        layout = "packed"
    if layout == "shared_prompt" and not prompt_sharing_ready(model):
        # Its kernel would run padded rows, which shared-prompt groups may not fit.
        layout = "padded"
    if layout == "shared_prompt":
        return shared_prompt_micro_batches(prompt_ids, c_lens, max_tokens), shared_prompt_logprobs
    p_lens = [len(p) for p in prompt_ids]
    if layout == "packed":
        return plan_forwards(model, p_lens, c_lens, max_tokens, pad_id)
    return length_sorted_micro_batches(p_lens, c_lens, max_tokens), completion_logprobs
