"""Completion log-probs from packed rows: several sequences per row, no padding between them.

A padded batch (:func:`~comlrl.core.logprobs.completion_logprobs`) runs every row at the width
of the longest prompt plus the longest completion; when completions vary in length (a
preference pair's winner and loser) a fifth or more of the work is padding, and splitting the
rows into more forwards to avoid it costs a fixed price per forward. Packing lays whole
``prompt + completion`` sequences end to end in rows as wide as the longest sequence (first fit,
longest first), with position ids that restart at 0 for each sequence. transformers' mask
builder reads restarting position ids as separate sequences (each attends only to itself), so
the log-probs equal the padded ones up to float rounding, and gradients flow the same way.

Whether a model honours that is checked once per model class and attention implementation by a
small probe (a sequence packed after another must score as it does alone); models that do not (custom code,
transformers versions without packed-sequence masks) keep the padded path. Logits are computed
at every packed position, so packing pays when the output head is cheap next to the body and
padding is large; :func:`packing_pays` weighs the two.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch

from comlrl.core.logprobs import (
    FORWARD_COST_TOKENS,
    TokenLogprobs,
    completion_logprobs,
    padded_tokens,
    padding_aware_micro_batches,
    selective_log_softmax,
)

# (model class, attention implementation) -> whether packed rows keep sequences apart
_VERIFIED: dict[tuple[type, str], bool] = {}


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


def bins_next_fit(lengths: Sequence[int], width: int) -> list[list[int]]:
    """Indices in order, a new bin whenever the next length does not fit ``width``. Rows
    listed bin by bin from :func:`bins_first_fit` come back in at most as many bins."""
    bins: list[list[int]] = []
    free = 0
    for i, n in enumerate(lengths):
        if not bins or n > free:
            bins.append([])
            free = width
        bins[-1].append(i)
        free -= n
    return bins


def _packable(model) -> bool:
    from transformers import PreTrainedModel

    from comlrl.core.rollout.generation import _forward_takes

    if not isinstance(model, PreTrainedModel) or model.config.is_encoder_decoder:
        return False
    return _forward_takes(type(model), "position_ids")


def _packed_forward(
    model, rows: Sequence[Sequence[int]], pad_id: int, width: int | None = None
) -> tuple[torch.Tensor, list]:
    """Logits ``[bins, width, vocab]`` of ``rows`` packed in order into bins ``width`` wide
    (default: the longest row), and each row's ``(bin, offset)``."""
    lengths = [len(r) for r in rows]
    width = max(max(lengths), width or 0)
    bins = bins_next_fit(lengths, width)
    ids = torch.full((len(bins), width), pad_id, dtype=torch.long)
    pos = torch.zeros((len(bins), width), dtype=torch.long)
    place: list = [None] * len(rows)
    for b, members in enumerate(bins):
        offset = 0
        for i in members:
            n = lengths[i]
            ids[b, offset : offset + n] = torch.tensor(list(rows[i]), dtype=torch.long)
            pos[b, offset : offset + n] = torch.arange(n)
            place[i] = (b, offset)
            offset += n
        # Trailing pads continue the last sequence's positions: they join it, and causal
        # attention keeps them out of every real token's view.
        last = lengths[members[-1]]
        pos[b, offset:] = torch.arange(last, last + width - offset)
    device = next(model.parameters()).device
    logits = model(input_ids=ids.to(device), position_ids=pos.to(device), use_cache=False).logits
    return logits, place


def packing_verified(model, pad_id: int) -> bool:
    """Whether ``model`` keeps packed sequences apart, checked once per class and attention
    implementation: a short sequence packed after another must score as it does alone, much
    closer than when it is simply appended (and so sees the first one). The contrast, rather
    than a fixed tolerance, keeps the check meaningful in half precision."""
    if not _packable(model):
        return False
    key = (type(model), str(getattr(model.config, "_attn_implementation", None)))
    if key not in _VERIFIED:
        vocab = model.get_input_embeddings().num_embeddings
        a = [(7 * k + 1) % vocab for k in range(5)]
        b = [(11 * k + 3) % vocab for k in range(3)]
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                packed, place = _packed_forward(model, [a, b], pad_id, width=len(a) + len(b))
                alone = model(input_ids=torch.tensor([b], device=device), use_cache=False).logits
                appended = model(input_ids=torch.tensor([a + b], device=device), use_cache=False)
        finally:
            model.train(was_training)
        if place[1] != (0, len(a)):  # the probe must share one row to test anything
            raise RuntimeError(f"packing probe placed its rows at {place}")
        alone = alone[0].float()
        apart = (packed[0, len(a) :].float() - alone).abs().max().item()
        seen = (appended.logits[0, len(a) :].float() - alone).abs().max().item()
        _VERIFIED[key] = seen > 0 and apart < 0.1 * seen
    return _VERIFIED[key]


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
    at :data:`~comlrl.core.logprobs.FORWARD_COST_TOKENS` tokens of body work. Body and head are
    priced by their weights.
    """
    head = model.get_output_embeddings()
    head_cost = head.weight.numel() if head is not None else 0
    body_cost = sum(p.numel() for p in model.parameters()) - head_cost
    embeddings = model.get_input_embeddings()
    tied = head is not None and embeddings is not None and embeddings.weight is head.weight
    if embeddings is not None and not tied:  # an input table is a lookup, not a matmul
        body_cost -= embeddings.weight.numel()
    padded += padded_forwards * FORWARD_COST_TOKENS
    packed_body = packed + packed_forwards * FORWARD_COST_TOKENS
    return _packing_pays_for(body_cost, head_cost, padded, packed, completion_padded, packed_body)


def _packing_pays_for(
    body: int, head: int, padded: int, packed: int, completion: int, packed_body: int | None = None
) -> bool:
    packed_body = packed if packed_body is None else packed_body
    return packed_body * body + packed * head < padded * body + completion * head


def plan_forwards(
    model, prompt_lengths: Sequence[int], completion_lengths: Sequence[int], max_tokens, pad_id
) -> tuple[list[list[int]], Callable[..., TokenLogprobs]]:
    """How to score rows in forwards of at most ``max_tokens`` tokens (None: no cap): the row
    groups, one forward each, and the kernel to call on each group's rows in the order given,
    ``kernel(model, prompt_ids, completion_ids, pad_id)``.

    The kernel is :func:`packed_logprobs` (rows packed first-fit, longest first) when ``model``
    keeps packed sequences apart (:func:`packing_verified`) and :func:`packing_pays` says it is
    cheaper; otherwise :func:`~comlrl.core.logprobs.completion_logprobs` over the groups of
    :func:`~comlrl.core.logprobs.padding_aware_micro_batches`.
    """
    padded_groups = padding_aware_micro_batches(prompt_lengths, completion_lengths, max_tokens)
    padded_plan = (padded_groups, completion_logprobs)
    if not prompt_lengths or min(prompt_lengths) == 0:
        return padded_plan
    lengths = [p + c for p, c in zip(prompt_lengths, completion_lengths)]
    width = max(lengths)
    bins = bins_first_fit(lengths, width)
    per_forward = len(bins) if not max_tokens else max(1, max_tokens // width)
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


def packed_logprobs(
    model, prompt_ids, completion_ids, pad_id: int, width: int | None = None
) -> TokenLogprobs:
    """Token log-probs of each completion, as :func:`~comlrl.core.logprobs.completion_logprobs`
    returns them (``[rows, longest completion]`` with a mask), from one forward of the
    ``prompt + completion`` sequences packed in order (next fit) into rows ``width`` wide
    (default: the longest sequence).

    The caller checks :func:`packing_verified` (or uses :func:`plan_forwards`) first. Gradients
    flow unless disabled. Prompts must not be empty.
    """
    if len(prompt_ids) != len(completion_ids):
        raise ValueError("prompt_ids and completion_ids must have the same length.")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("packed_logprobs needs a non-empty prompt for every row.")
    rows = [list(p) + list(c) for p, c in zip(prompt_ids, completion_ids)]
    logits, place = _packed_forward(model, rows, pad_id, width)
    device = logits.device
    c_width = max(1, max(len(c) for c in completion_ids))
    bins, cols, targets, slots = [], [], [], []
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        b, offset = place[i]
        start = offset + len(p) - 1  # the position before each completion token predicts it
        bins.extend([b] * len(c))
        cols.extend(range(start, start + len(c)))
        targets.extend(c)
        slots.extend(range(i * c_width, i * c_width + len(c)))
    values = torch.zeros(len(rows) * c_width, device=device, dtype=torch.float32)
    mask = torch.zeros(len(rows), c_width, dtype=torch.float32)
    if targets:
        picked = logits[torch.tensor(bins, device=device), torch.tensor(cols, device=device)]
        lp = selective_log_softmax(picked, torch.tensor(targets, device=device))
        values = values.index_put((torch.tensor(slots, device=device),), lp)
        for i, c in enumerate(completion_ids):
            mask[i, : len(c)] = 1.0
    return TokenLogprobs(values.view(len(rows), c_width), mask.to(device))
