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


@functools.lru_cache(maxsize=None)
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
