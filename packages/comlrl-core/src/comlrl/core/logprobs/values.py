"""Value forwards: a scalar estimate per token row from a transformer body and a value head.

A critic is a transformer *body* (no LM head, so a value never computes vocabulary logits) and
a small head module mapping a hidden state to a scalar (the actor-critic family's
``ValueHead``); a head can also sit on an actor, and then :func:`logprobs_and_values` reads
the completion log-probs and the value from one forward.
Rows are left-padded, so every row's last real token sits in the last column and a value "at
the last token" is one column of the batch.

:func:`estimate_values` is the rollout side (no gradients, the critic in eval mode, forwards
cut by the token budget like the log-prob engine's). The regression step that trains a critic is :mod:`comlrl.core.training.value_step`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn

from comlrl.core.logprobs.kernels import TokenLogprobs, padded_forward
from comlrl.core.logprobs.planning import micro_batches_for
from comlrl.core.rollout.generation import left_pad
from comlrl.core.training.precision import scoring_context

VALUE_AT = ("prompt_end", "sequence_end")


def body_hidden(body: nn.Module, input_ids, attention_mask, position_ids=None) -> torch.Tensor:
    """The last layer's hidden states ``[B, L, d]`` of a transformer body."""
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
    if position_ids is not None:
        kwargs["position_ids"] = position_ids
    out = body(**kwargs)
    hidden = getattr(out, "last_hidden_state", None)
    if hidden is None:
        hidden = out[0]
    return hidden


def last_token_values(
    body: nn.Module, head: nn.Module, rows: Sequence[Sequence[int]], pad_id: int
) -> torch.Tensor:
    """Values at the last token of each row in one left-padded forward of ``body`` (see
    :func:`comlrl.core.models.backbone.backbone_of`). Gradients flow unless called under
    ``no_grad``."""
    if not rows:
        return torch.zeros(0)
    device = next(body.parameters()).device
    ids, mask = left_pad(rows, pad_id)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    hidden = body_hidden(body, ids.to(device), mask.to(device), positions.to(device))
    head_device = next(head.parameters()).device
    return head(hidden[:, -1].to(head_device))


def logprobs_and_values(
    model: nn.Module,
    head: nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    pad_id: int,
    value_at: str = "prompt_end",
    temperature: float = 1.0,
) -> tuple[TokenLogprobs, torch.Tensor]:
    """Completion log-probs and a value per row from ONE forward of a causal LM with a head.

    ``value_at="prompt_end"`` reads V(h) at the last prompt token (by causality it equals a
    prompt-only forward); ``"sequence_end"`` reads Q(h, a) at the last completion token.
    Logits are produced only for the completion columns, at ``temperature`` (the sampler's).
    """
    if value_at not in VALUE_AT:
        raise ValueError(f"value_at must be one of {list(VALUE_AT)}, got {value_at!r}.")
    lp, out, p_width = padded_forward(
        model, prompt_ids, completion_ids, pad_id, temperature, output_hidden_states=True
    )
    device = next(model.parameters()).device
    hidden = out.hidden_states[-1]
    if value_at == "prompt_end":
        picked = hidden[:, p_width - 1]
    else:
        lengths = torch.tensor([len(c) for c in completion_ids], device=device)
        rows = torch.arange(hidden.shape[0], device=device)
        picked = hidden[rows, p_width - 1 + lengths]
    head_device = next(head.parameters()).device
    return lp, head(picked.to(head_device))


def estimate_values(
    body: nn.Module,
    head: nn.Module,
    rows: Sequence[Sequence[int]],
    pad_id: int,
    max_tokens: Any,
    args: Any = None,
) -> list[float]:
    """The estimates at the last token of each row without gradients, ``body`` and ``head``
    in eval mode (no dropout: the estimates are the targets' baseline) and left as they were;
    forwards cut by ``max_tokens`` (``logprob_max_tokens``, resolved for ``body``). With the
    run's ``args`` they run in the precision of the critic's update (bf16 autocast under
    ``bf16=True``), so the value clip is centred on an estimate of the same precision."""

    modes = [(m, m.training) for m in (body, head)]
    for m, _ in modes:
        m.eval()
    out: list[float] = []
    try:
        context = scoring_context(args, body) if args is not None else nullcontext()
        with torch.no_grad(), context:
            for idx in micro_batches_for(body, [len(r) for r in rows], max_tokens):
                values = last_token_values(body, head, [rows[j] for j in idx], pad_id)
                out.extend(float(v) for v in values.tolist())
    finally:
        for m, was in modes:
            m.train(was)
    return out
