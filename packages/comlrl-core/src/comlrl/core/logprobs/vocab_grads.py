"""The gradients of the vocabulary-sized weights (the output head, the input embedding), written
straight into their ``.grad``.

At a 151,936-token vocabulary these weights are the largest tensors of a small model (544 MB
each in fp32 at hidden 896, one tensor when tied), and autograd's own path gives each of them a
second full-size buffer per backward: the head's weight gradient is held apart until every use
of the weight has reported (for a tied weight, until the embedding's backward at the very end),
and the embedding's backward builds a dense ``[vocab, hidden]`` gradient of which only the rows
of the batch's tokens are not zero. Measured on the Qwen2.5-0.5B shape, these buffers were most
of a one-row update's peak above the model-and-optimizer floor (``python -m benchmarks
realsize``).

Here both contributions are added in place into the weight's ``.grad`` (allocated on first use),
and autograd gets no gradient for the weight from these two paths:

- :func:`head_logprobs` scores ``log_softmax(head(hidden) / T)[targets]`` in position chunks,
  keeping only the hidden states; its backward recomputes each chunk's logits (under the
  forward's autocast state), returns the hidden states' gradient and adds ``dlogits^T @ hidden``
  to ``head.weight.grad`` (and the bias's).
- :func:`embed` looks the ids up in the embedding weight; its backward adds the rows of the
  output gradient into ``weight.grad`` at those ids (pads skipped, as ``padding_idx`` says).

Values are those of the autograd path; gradients equal them up to float summation order. Both
apply only to plain ``nn.Linear`` heads and ``nn.Embedding`` tables of at least
:data:`MIN_ELEMENTS` weights (so test-sized models keep autograd's path), not to sharded
(``DTensor``) weights, whose gradients FSDP reduces through its own hooks. A consequence to know:
``torch.autograd.grad`` over one of these weights sees no contribution from these paths; the
trainers only use ``backward()``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

# Weights smaller than this (4M elements: a 16k vocabulary at hidden 256) keep autograd's path.
MIN_ELEMENTS = 2**22


def _is_dtensor(value: Any) -> bool:
    from comlrl.core.distributed.sharding import is_dtensor

    return is_dtensor(value)


def sinks_weight(weight: torch.Tensor | None) -> bool:
    """Whether ``weight``'s gradient is written in place here (see the module docstring)."""
    return (
        weight is not None
        and weight.numel() >= MIN_ELEMENTS
        and weight.layout == torch.strided
        and not _is_dtensor(weight)
    )


def _grad_buffer(weight: torch.Tensor) -> torch.Tensor:
    if weight.grad is None:
        weight.grad = torch.zeros_like(weight)
    return weight.grad


def _autocast_state(device_type: str) -> tuple[bool, torch.dtype]:
    return torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)


class _HeadLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, chunk, score_chunk, measure):
        device_type = hidden.device.type
        parts, measured = [], []
        with torch.no_grad():
            for s in range(0, hidden.shape[0], chunk):
                logits = F.linear(hidden[s : s + chunk], weight, bias)
                parts.append(score_chunk(logits, targets[s : s + chunk]))
                if measure is not None:
                    # From the forward's logits only: the backward recomputes no measurement.
                    measured.append(measure(logits))
                del logits
        ctx.save_for_backward(hidden, targets)
        ctx.weight, ctx.bias, ctx.chunk, ctx.score_chunk = weight, bias, chunk, score_chunk
        ctx.device_type, ctx.autocast = device_type, _autocast_state(device_type)
        values = parts[0] if len(parts) == 1 else torch.cat(parts)
        if measure is None:
            return values, None
        extra = torch.cat(measured)
        ctx.mark_non_differentiable(extra)
        return values, extra

    @staticmethod
    def backward(ctx, grad_out, _grad_measured=None):
        hidden, targets = ctx.saved_tensors
        weight, bias, chunk = ctx.weight, ctx.bias, ctx.chunk
        want_hidden, want_weight, want_bias = ctx.needs_input_grad[:3]
        d_hidden = torch.zeros_like(hidden) if want_hidden else None
        w_grad = _grad_buffer(weight) if want_weight else None
        b_grad = _grad_buffer(bias) if want_bias else None
        enabled, dtype = ctx.autocast
        frozen_w = weight.detach()
        frozen_b = None if bias is None else bias.detach()
        for s in range(0, hidden.shape[0], chunk):
            h = hidden[s : s + chunk].detach().requires_grad_(want_hidden)
            with (
                torch.enable_grad(),
                torch.autocast(ctx.device_type, dtype=dtype, enabled=enabled),
            ):
                logits = F.linear(h, frozen_w, frozen_b)
                lp = ctx.score_chunk(logits, targets[s : s + chunk])
            wanted = (logits, h) if want_hidden else (logits,)
            grads = torch.autograd.grad(lp, wanted, grad_out[s : s + chunk])
            d_logits = grads[0]
            if w_grad is not None:
                w_grad.addmm_(d_logits.t().to(w_grad.dtype), h.detach().to(w_grad.dtype))
            if b_grad is not None:
                b_grad.add_(d_logits.sum(0).to(b_grad.dtype))
            if d_hidden is not None:
                d_hidden[s : s + chunk] = grads[1]
            del logits, lp, grads, d_logits
        return d_hidden, None, None, None, None, None, None


def head_logprobs(head, hidden, targets, chunk: int, score_chunk, measure=None):
    """``score_chunk(head(hidden[c]), targets[c])`` over position chunks ``c`` of ``chunk``
    rows, for a plain ``nn.Linear`` ``head``: the head's parameter gradients go into their
    ``.grad`` in place (see the module docstring), the hidden states' flow back as usual.

    Returns the scores and ``measure(logits)`` of every chunk's forward logits concatenated
    (no gradient; a per-position diagnostic such as the token entropy), or None without
    ``measure``."""
    return _HeadLogprobs.apply(hidden, head.weight, head.bias, targets, chunk, score_chunk, measure)


def head_sinks(head) -> bool:
    """Whether :func:`head_logprobs` applies to ``head`` (a plain, large ``nn.Linear``)."""
    return type(head) is torch.nn.Linear and sinks_weight(head.weight)


class _Embed(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ids, weight, padding_idx):
        ctx.save_for_backward(ids)
        ctx.weight, ctx.padding_idx = weight, padding_idx
        return F.embedding(ids, weight, padding_idx)

    @staticmethod
    def backward(ctx, grad_out):
        if ctx.needs_input_grad[1]:
            (ids,) = ctx.saved_tensors
            flat = ids.reshape(-1)
            rows = grad_out.reshape(flat.shape[0], -1)
            if ctx.padding_idx is not None:
                keep = flat != ctx.padding_idx
                flat, rows = flat[keep], rows[keep]
            buf = _grad_buffer(ctx.weight)
            # index_put_ with accumulate sums repeated ids, deterministically on every device.
            buf.index_put_((flat,), rows.to(buf.dtype), accumulate=True)
        return None, None, None


def embedding_sinks(embedding) -> bool:
    """Whether :func:`embed` reproduces ``embedding``'s forward: a plain, large
    ``nn.Embedding`` without max-norm renormalisation, frequency scaling or sparse gradients."""
    return (
        type(embedding) is torch.nn.Embedding
        and embedding.max_norm is None
        and not embedding.scale_grad_by_freq
        and not embedding.sparse
        and sinks_weight(embedding.weight)
    )


def embed(embedding, ids: torch.Tensor) -> torch.Tensor:
    """``embedding(ids)`` with the weight's gradient added in place (see the module docstring)."""
    return _Embed.apply(ids, embedding.weight, embedding.padding_idx)
