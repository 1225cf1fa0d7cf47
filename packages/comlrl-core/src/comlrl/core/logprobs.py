"""Per-token log-probabilities of completions given their prompts.

Sequences are packed as ``[left-padded prompt | right-padded completion]`` so every completion
starts at the same column; position ids come from the attention mask, so padding does not shift
positions. Only the completion columns get logits (``logits_to_keep``), and the log-softmax is
selective: ``logit[token] - logsumexp(logits)`` in fp32, never a full-vocabulary log-prob tensor.
EOS (the last real completion token) is scored; pads never are.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch


@dataclass
class TokenLogprobs:
    """Token log-probs ``[B, L]`` with a 0/1 ``mask`` of real completion tokens."""

    values: torch.Tensor
    mask: torch.Tensor

    def sequence_sum(self) -> torch.Tensor:
        """Sum of token log-probs per sequence."""
        return (self.values * self.mask).sum(-1)

    def lengths(self) -> torch.Tensor:
        """Number of scored tokens per sequence."""
        return self.mask.sum(-1)


def pack(prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]], pad_id: int):
    """Build ``input_ids``, ``attention_mask``, ``position_ids`` and the completion mask."""
    if len(prompt_ids) != len(completion_ids):
        raise ValueError("prompt_ids and completion_ids must have the same length.")
    p_width = max(len(p) for p in prompt_ids)
    c_width = max(1, max(len(c) for c in completion_ids))
    b = len(prompt_ids)
    ids = torch.full((b, p_width + c_width), pad_id, dtype=torch.long)
    attn = torch.zeros((b, p_width + c_width), dtype=torch.long)
    comp_mask = torch.zeros((b, c_width), dtype=torch.float32)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        ids[i, p_width - len(p) : p_width] = torch.tensor(list(p), dtype=torch.long)
        attn[i, p_width - len(p) : p_width] = 1
        if c:
            ids[i, p_width : p_width + len(c)] = torch.tensor(list(c), dtype=torch.long)
            attn[i, p_width : p_width + len(c)] = 1
            comp_mask[i, : len(c)] = 1.0
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    return ids, attn, positions, comp_mask, p_width, c_width


def _supports_logits_to_keep(model) -> bool:
    return _forward_takes_logits_to_keep(type(model))


@functools.cache
def _forward_takes_logits_to_keep(model_cls: type) -> bool:
    # Keyed by class: reading a signature costs more than a small model's forward.
    try:
        return "logits_to_keep" in inspect.signature(model_cls.forward).parameters
    except (TypeError, ValueError):
        return False


def selective_log_softmax(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log softmax(logits)[targets]`` computed in fp32 without materialising all log-probs."""
    logits = logits.float()
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def completion_logprobs(model, prompt_ids, completion_ids, pad_id: int) -> TokenLogprobs:
    """Token log-probs of each completion under ``model`` in one padded forward.

    Gradients flow when called outside ``no_grad``; wrap in ``torch.no_grad()`` for reference
    or old-policy scoring.
    """
    ids, attn, pos, comp_mask, p_width, c_width = pack(prompt_ids, completion_ids, pad_id)
    device = next(model.parameters()).device
    kwargs = dict(
        input_ids=ids.to(device),
        attention_mask=attn.to(device),
        position_ids=pos.to(device),
        use_cache=False,
    )
    if _supports_logits_to_keep(model):
        # Column p_width-1 predicts the first completion token; keep c_width+1 columns.
        kwargs["logits_to_keep"] = c_width + 1
        logits = model(**kwargs).logits[:, :-1]
    else:
        logits = model(**kwargs).logits[:, p_width - 1 : -1]
    targets = ids[:, p_width:].to(device)
    values = selective_log_softmax(logits, targets)
    return TokenLogprobs(values, comp_mask.to(device))


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


def length_sorted_micro_batches(
    prompt_lengths: Sequence[int], completion_lengths: Sequence[int], max_tokens: int | None
) -> list[list[int]]:
    """Row indices grouped for :func:`completion_logprobs`, with as little padding as possible.

    Rows are ordered by completion then prompt length, and cut into consecutive groups whose
    padded size as :func:`pack` builds it (``(max prompt + max completion) x rows``) stays
    within ``max_tokens`` (None: one group). A loss that is a sum over rows is unchanged by the
    grouping; only the padded work shrinks.
    """
    if len(prompt_lengths) != len(completion_lengths):
        raise ValueError("prompt_lengths and completion_lengths must have the same length.")
    order = sorted(
        range(len(prompt_lengths)), key=lambda i: (completion_lengths[i], prompt_lengths[i])
    )
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


# What one more padded forward (and its share of the backward) costs, in padded tokens: its
# fixed price (kernel launches, masks, Python) measured on CPU is about 100 tokens of work for a
# 5M-parameter model and 250 for a 0.1M one, and less for larger models, so splitting pays when
# it saves more padding than this.
FORWARD_COST_TOKENS = 64


def padding_aware_micro_batches(
    prompt_lengths: Sequence[int],
    completion_lengths: Sequence[int],
    max_tokens: int | None,
    forward_cost: int | None = None,
) -> list[list[int]]:
    """:func:`length_sorted_micro_batches`, also cut where rows of very different lengths meet.

    Rows are visited by completion then prompt length; a row starts a new group when adding it
    would exceed ``max_tokens`` padded tokens (None: no cap) or would add more than
    ``forward_cost`` tokens of padding to the group (its own and the other rows'), that is when
    a separate forward is cheaper than the padding. For rows whose lengths vary a lot (a
    preference pair's winner and loser) this removes most padding at the price of a few more,
    smaller forwards. ``forward_cost`` defaults to :data:`FORWARD_COST_TOKENS`.
    """
    if forward_cost is None:
        forward_cost = FORWARD_COST_TOKENS
    if len(prompt_lengths) != len(completion_lengths):
        raise ValueError("prompt_lengths and completion_lengths must have the same length.")
    order = sorted(
        range(len(prompt_lengths)), key=lambda i: (completion_lengths[i], prompt_lengths[i])
    )
    groups: list[list[int]] = []
    group: list[int] = []
    p_max = c_max = 0
    for i in order:
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
    """Padded tokens of ``groups`` as :func:`pack` builds them (``(longest prompt + longest
    completion) x rows`` per group)."""
    return sum(
        (max(prompt_lengths[i] for i in g) + max(1, max(completion_lengths[i] for i in g))) * len(g)
        for g in groups
        if g
    )


def _prompt_sharing_ready(model) -> bool:
    from transformers import PreTrainedModel

    from comlrl.core.rollout.generation import _cache_argument, _forward_takes

    if not isinstance(model, PreTrainedModel) or model.config.is_encoder_decoder:
        return False
    # Checkpointed training turns the KV cache off (transformers renamed the flag in v5).
    checkpointing = getattr(model, "is_activation_checkpointing", None)
    if checkpointing is None:
        checkpointing = getattr(model, "is_gradient_checkpointing", False)
    if model.training and checkpointing:
        return False
    cls = type(model)
    return _cache_argument(cls) is not None and _forward_takes(cls, "position_ids")


def shared_prompt_logprobs(model, prompt_ids, completion_ids, pad_id: int) -> TokenLogprobs:
    """:func:`completion_logprobs`, encoding each distinct prompt once.

    Rows that share a prompt (a prompt's K samples) share one prompt forward: the distinct
    prompts run first with a KV cache, the cache is gathered per row, and the completions run on
    top of it. The values equal :func:`completion_logprobs` up to float rounding, and gradients
    flow through both passes. Models that cannot take a cache this way (wrappers, encoder-decoder
    models, gradient checkpointing in training) and batches without a repeated prompt use
    :func:`completion_logprobs` itself.
    """
    if len(prompt_ids) != len(completion_ids):
        raise ValueError("prompt_ids and completion_ids must have the same length.")
    keys: dict[tuple[int, ...], int] = {}
    owner = [keys.setdefault(tuple(p), len(keys)) for p in prompt_ids]
    c_width = max((len(c) for c in completion_ids), default=0)
    if len(keys) == len(prompt_ids) or c_width == 0 or not _prompt_sharing_ready(model):
        return completion_logprobs(model, prompt_ids, completion_ids, pad_id)
    from comlrl.core.rollout.generation import _cache_argument, _returned_cache, left_pad

    device = next(model.parameters()).device
    ids, mask = left_pad([list(k) for k in keys], pad_id)
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    keep = {"logits_to_keep": 1} if _supports_logits_to_keep(model) else {}
    prefix = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **keep)
    cache = _returned_cache(prefix)
    if cache is None or not hasattr(cache, "batch_select_indices"):
        return completion_logprobs(model, prompt_ids, completion_ids, pad_id)
    rows = torch.tensor(owner, device=device)
    cache.batch_select_indices(rows)
    b = len(completion_ids)
    comp = torch.full((b, c_width), pad_id, dtype=torch.long)
    comp_mask = torch.zeros((b, c_width), dtype=torch.float32)
    for i, c in enumerate(completion_ids):
        if c:
            comp[i, : len(c)] = torch.tensor(list(c), dtype=torch.long)
            comp_mask[i, : len(c)] = 1.0
    comp, comp_mask = comp.to(device), comp_mask.to(device)
    attn = torch.cat([mask[rows], comp_mask.long()], dim=1)
    comp_pos = pos[rows][:, -1:] + 1 + torch.arange(c_width, device=device)[None]
    out = model(
        input_ids=comp,
        attention_mask=attn,
        position_ids=comp_pos,
        use_cache=True,
        **{_cache_argument(type(model)): cache},
    )
    # The prompt's last position predicts the first completion token.
    logits = torch.cat([prefix.logits[:, -1:][rows], out.logits[:, :-1]], dim=1)
    return TokenLogprobs(selective_log_softmax(logits, comp), comp_mask)


def shared_prompt_micro_batches(
    prompt_ids: Sequence[Sequence[int]], completion_lengths: Sequence[int], max_tokens: int | None
) -> list[list[int]]:
    """Row groups for :func:`shared_prompt_logprobs`: rows of one prompt stay together.

    Prompts are visited by their rows' longest completion, rows within a prompt by completion
    length; groups are cut where ``distinct prompts x longest prompt + rows x longest
    completion`` (the tokens the two passes run) would exceed ``max_tokens`` (None: one group).
    """
    if len(prompt_ids) != len(completion_lengths):
        raise ValueError("prompt_ids and completion_lengths must have the same length.")
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
        p, c = max(p_max, len(key)), max(c_max, completion_lengths[i], 1)
        prompts = len(seen | {key})
        if group and prompts * p + (len(group) + 1) * c > max_tokens:
            groups.append(group)
            group, seen, p, c = [], set(), len(key), max(completion_lengths[i], 1)
        group.append(i)
        seen.add(key)
        p_max, c_max = p, c
    if group:
        groups.append(group)
    return groups
