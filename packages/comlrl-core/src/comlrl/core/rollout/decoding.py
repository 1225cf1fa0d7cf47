"""Decoding that drops finished rows: the sampling rule of ``model.generate`` for plain sampling
and greedy decoding, with every finished row removed from the batch and its KV cache, so a batch
costs about the tokens it produces rather than rows x the longest row.
"""

from __future__ import annotations

from typing import Any

import torch

from comlrl.core.models.forward_api import cache_argument, forward_takes, returned_cache
from comlrl.core.rollout.direct_step import make_steps

# ``generation_config`` fields that add logits processors or stopping rules of their own; when a
# model sets any of them away from the default, decoding goes through ``model.generate``.
_PROCESSOR_FIELDS = (
    "min_length",
    "min_new_tokens",
    "repetition_penalty",
    "encoder_repetition_penalty",
    "no_repeat_ngram_size",
    "bad_words_ids",
    "suppress_tokens",
    "begin_suppress_tokens",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "exponential_decay_length_penalty",
    "sequence_bias",
    "typical_p",
    "epsilon_cutoff",
    "eta_cutoff",
    "min_p",
    "renormalize_logits",
    "guidance_scale",
    "watermarking_config",
    "stop_strings",
    "remove_invalid_values",
    "diversity_penalty",
    "max_time",
)
_PLAIN_KEYS = {
    "max_new_tokens",
    "min_new_tokens",
    "num_beams",
    "do_sample",
    "temperature",
    "top_p",
    "top_k",
}


def supports_compacting(model, gen_kwargs: dict[str, Any]) -> bool:
    """Whether :func:`decode_compacting` reproduces ``model.generate`` for these settings."""
    if set(gen_kwargs) - _PLAIN_KEYS or gen_kwargs.get("num_beams", 1) != 1:
        return False
    from transformers import GenerationConfig, PreTrainedModel

    # Wrappers (value heads, adapters) keep their own generate; only plain causal LMs qualify.
    if not isinstance(model, PreTrainedModel) or model.config.is_encoder_decoder:
        return False
    if cache_argument(type(model)) is None or not forward_takes(type(model), "position_ids"):
        return False
    gen_config = model.generation_config

    defaults = GenerationConfig()
    return all(
        getattr(gen_config, name, None) == getattr(defaults, name, None)
        for name in _PROCESSOR_FIELDS
    )


def hold_eos(logits: torch.Tensor, step: int, gen_kwargs: dict[str, Any], eos: torch.Tensor):
    """``generate``'s ``min_new_tokens`` rule: before that many new tokens, EOS is impossible
    (its logits are set to -inf ahead of the temperature/top-k/top-p warpers)."""
    if step < int(gen_kwargs.get("min_new_tokens") or 0) and eos.numel():
        logits = logits.index_fill(-1, eos, float("-inf"))
    return logits


def next_tokens(
    logits: torch.Tensor,
    gen_kwargs: dict[str, Any],
    owner: torch.Tensor,
    total_rows: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One token per batch row with the rule of ``generate``'s temperature/top-k/top-p warpers.

    The draw is made over ``total_rows`` rows, as ``generate`` makes it over the whole batch
    every step (rows that left the batch get a placeholder distribution): ``multinomial``
    consumes the same random numbers whatever the probabilities, so a seeded run samples the
    same tokens as ``generate`` would. ``generator`` (when given) supplies those numbers
    instead of the process-wide generator.
    """
    if not gen_kwargs.get("do_sample"):
        return logits.argmax(dim=-1)
    temperature = gen_kwargs.get("temperature", 1.0)
    if temperature is not None and temperature != 1.0:
        logits = logits / temperature
    top_k = gen_kwargs.get("top_k") or 0
    if top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    top_p = gen_kwargs.get("top_p")
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=False)
        drop = sorted_logits.softmax(dim=-1).cumsum(dim=-1) <= (1 - top_p)
        drop[..., -1:] = False
        logits = logits.masked_fill(drop.scatter(1, order, drop), float("-inf"))
    probs = logits.softmax(dim=-1)
    if probs.shape[0] != total_rows:
        full = probs.new_zeros((total_rows, probs.shape[1]))
        full[:, 0] = 1.0
        full[owner] = probs
        probs = full
    return draw_rows(probs, generator)[owner]


def draw_rows(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row of ``probs``: the token ``torch.multinomial(probs, 1)`` draws, from
    the same random numbers.

    On the CPU, multinomial's one-sample draw is ``argmax(probs / q)`` with ``q ~ Exp(1)`` from
    ``exponential_``, whose kernel turns one double uniform per element into ``-log1p(-u)``
    with a scalar logarithm: most of a small model's decode step. Drawing the same uniforms
    with ``torch.rand`` and taking the logarithm vectorized gives the same ``q`` bit for bit
    (the tests compare both draws under every kernel set) at under half the cost. Elsewhere
    the draw is ``multinomial``'s own.
    """
    if probs.device.type != "cpu":
        return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(1)
    finite = (probs.max() < float("inf")) & (probs.min() >= 0)
    if not bool(finite & (probs.sum(-1) > 0).all()):  # one check on the common path
        if not bool(finite):
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    u = torch.rand(probs.shape, dtype=torch.float64, generator=generator)
    q = u.neg_().log1p_().neg_().to(probs.dtype)
    return (probs / q).argmax(dim=-1)


def decode_compacting(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    gen_kwargs: dict[str, Any],
    eos_ids: set[int],
    pad_id: int,
    copies: int = 1,
    generator: torch.Generator | None = None,
    *,
    direct: bool = False,
    steps_factory=None,
) -> list[list[int]]:
    """Decode ``copies`` continuations of every (left-padded) row, prompt-major; return each
    continuation's new tokens, through its first EOS.

    Each prompt is encoded once and its KV cache repeated for its copies. Rows that hit EOS
    leave the batch: once a quarter of the batch has finished, the finished rows are dropped
    from the inputs and the KV cache, so later steps only run live rows. ``direct`` decodes
    with :class:`~comlrl.core.rollout.direct_step.DirectSteps` (the caller checked
    :func:`~comlrl.core.rollout.direct_step.verified`) instead of ``model.forward``;
    ``steps_factory(model, cache, mask, positions, max_new)`` supplies other decode steps
    (the static-cache path's), with their own ``keep_rows`` rule for dropping finished rows.
    """
    max_new = int(gen_kwargs["max_new_tokens"])
    rows = input_ids.shape[0] * copies
    if max_new <= 0 or rows == 0:
        return [[] for _ in range(rows)]
    device = input_ids.device
    eos = torch.tensor(sorted(eos_ids), dtype=torch.long, device=device)
    cache, logits, positions, mask = prefill_copies(model, input_ids, attention_mask, copies)
    if steps_factory is None:
        steps = make_steps(model, cache, mask, positions, max_new, direct)
    else:
        steps = steps_factory(model, cache, mask, positions, max_new)
    del cache, mask
    owner = torch.arange(rows, device=device)  # original row of each batch row
    live = torch.ones(rows, dtype=torch.bool, device=device)
    last_pos = positions[:, -1]
    # Every batch row's token goes in, finished ones too (cut at their EOS at the end): one
    # indexed write per step instead of a Python append per row.
    drawn = torch.empty((rows, max_new), dtype=torch.long, device=device)
    for step in range(max_new):
        logits = hold_eos(logits, step, gen_kwargs, eos)
        tokens = next_tokens(logits, gen_kwargs, owner, rows, generator)
        drawn[owner, step] = tokens
        if eos.numel():
            live = live & ~torch.isin(tokens, eos)
        if step + 1 == max_new or not bool(live.any()):
            break
        keep = steps.keep_rows(live)
        if keep is not None:
            steps.select(keep)
            owner, tokens, last_pos = owner[keep], tokens[keep], last_pos[keep]
            live = live[keep]
        # Finished rows still in the batch are fed a pad; their outputs are ignored.
        tokens = torch.where(live, tokens, torch.full_like(tokens, pad_id))
        last_pos = last_pos + 1
        logits = steps(tokens, last_pos)
    return through_first_eos(drawn[:, : step + 1], eos)


def through_first_eos(drawn: torch.Tensor, eos: torch.Tensor) -> list[list[int]]:
    """Each row of ``drawn`` up to and including its first token of ``eos`` (the whole row
    when it has none); what follows a row's EOS is never read."""
    steps = drawn.shape[1]
    hit = torch.isin(drawn, eos)
    ends = torch.where(hit.any(1), hit.int().argmax(1) + 1, steps)
    return [row[:end] for row, end in zip(drawn.tolist(), ends.tolist())]


def prefill_copies(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, copies: int):
    """Encode every (left-padded) prompt once and repeat its KV cache for its ``copies``
    (prompt-major); a cache that cannot be repeated gets every copy encoded instead.

    Returns the cache, the float logits of each row's last position, the position ids and the
    attention mask, all ``rows * copies`` long.
    """
    keep_logits = {"logits_to_keep": 1} if forward_takes(type(model), "logits_to_keep") else {}

    def prefill(ids: torch.Tensor, mask: torch.Tensor):
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        res = model(
            input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **keep_logits
        )
        return returned_cache(res), res.logits[:, -1, :].float(), pos

    cache, logits, positions = prefill(input_ids, attention_mask)
    mask = attention_mask
    if copies > 1:
        if hasattr(cache, "batch_repeat_interleave"):
            cache.batch_repeat_interleave(copies)
            logits = logits.repeat_interleave(copies, dim=0)
            positions = positions.repeat_interleave(copies, dim=0)
            mask = mask.repeat_interleave(copies, dim=0)
        else:  # a cache that cannot be repeated: encode every copy
            mask = attention_mask.repeat_interleave(copies, dim=0)
            cache, logits, positions = prefill(input_ids.repeat_interleave(copies, dim=0), mask)
    return cache, logits, positions, mask
