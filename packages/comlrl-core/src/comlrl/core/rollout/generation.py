"""Batched sampling: every prompt of a batch times K samples in as few decoding calls as the
memory budget allows. Records keep token ids, so nothing is re-tokenized from text later.

For plain sampling (temperature, top-k, top-p) and greedy decoding, rows are decoded by
:func:`decode_compacting`, which applies the same sampling rule as ``model.generate`` but drops
finished rows from the batch (and from the KV cache), so a batch costs about the tokens it
actually produces instead of rows x the longest row. Anything else (beam search, repetition
penalties, a model ``generation_config`` with extra logits processors, user ``generate``
keyword arguments) goes through ``model.generate`` unchanged.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from comlrl.core.rollout.chat import encode_prompts


@dataclass
class SamplingParams:
    """Sampling settings shared by training rollouts (eval may use a greedy copy)."""

    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    do_sample: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def generate_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``model.generate``; explicit so a model's own
        ``generation_config`` (repetition penalties, other top-k) never applies silently."""
        kwargs: dict[str, Any] = dict(max_new_tokens=self.max_new_tokens, num_beams=1)
        if self.do_sample:
            kwargs.update(
                do_sample=True,
                temperature=self.temperature,
                top_p=self.top_p,
                top_k=0 if self.top_k is None else self.top_k,
            )
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        kwargs.update(repetition_penalty=None, no_repeat_ngram_size=None)
        kwargs.update({k: v for k, v in self.extra.items() if k != "do_sample"})
        return {k: v for k, v in kwargs.items() if v is not None or k in self.extra}


@dataclass
class PromptSamples:
    """K sampled completions of one prompt."""

    prompt: str
    prompt_ids: list[int]
    completion_ids: list[list[int]]
    texts: list[str]

    @property
    def num_tokens(self) -> int:
        return sum(len(c) for c in self.completion_ids)


def tokenize_prompts(tokenizer, prompts: Sequence[str], max_length: int | None = None):
    """Token ids of each prompt (no padding); truncated from the left to ``max_length``.
    Templated prompts are encoded without adding special tokens again (one BOS, not two)."""
    ids = encode_prompts(tokenizer, prompts)
    if max_length is not None:
        ids = [x[-max_length:] for x in ids]
    for p, x in zip(prompts, ids):
        if not x:
            raise ValueError(f"Prompt {p!r} tokenized to zero tokens; formatters must return text.")
    return ids


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack token rows, padded on the left, with the matching attention mask."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r) :] = torch.tensor(list(r), dtype=torch.long)
            mask[i, width - len(r) :] = 1
    return ids, mask


def trim_completion(row: Sequence[int], eos_ids: set[int], pad_id: int | None) -> list[int]:
    """Cut a generated row after its first EOS (kept: it is an action the policy took).
    Rows without EOS end at their last non-pad token."""
    out = []
    for tok in row:
        out.append(int(tok))
        if tok in eos_ids:
            return out
    if pad_id is not None and pad_id not in eos_ids:
        while out and out[-1] == pad_id:
            out.pop()
    return out


def _eos_ids(tokenizer, model) -> set[int]:
    ids: set[int] = set()
    for value in (tokenizer.eos_token_id, getattr(model.generation_config, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids


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
_PLAIN_KEYS = {"max_new_tokens", "num_beams", "do_sample", "temperature", "top_p", "top_k"}


def supports_compacting(model, gen_kwargs: dict[str, Any]) -> bool:
    """Whether :func:`decode_compacting` reproduces ``model.generate`` for these settings."""
    if set(gen_kwargs) - _PLAIN_KEYS or gen_kwargs.get("num_beams", 1) != 1:
        return False
    from transformers import GenerationConfig, PreTrainedModel

    # Wrappers (value heads, adapters) keep their own generate; only plain causal LMs qualify.
    if not isinstance(model, PreTrainedModel) or model.config.is_encoder_decoder:
        return False
    if _cache_argument(type(model)) is None or not _forward_takes(type(model), "position_ids"):
        return False
    gen_config = model.generation_config

    defaults = GenerationConfig()
    return all(
        getattr(gen_config, name, None) == getattr(defaults, name, None)
        for name in _PROCESSOR_FIELDS
    )


def _next_tokens(
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
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(1)[owner]


def decode_compacting(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    gen_kwargs: dict[str, Any],
    eos_ids: set[int],
    pad_id: int,
    copies: int = 1,
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """Decode ``copies`` continuations of every (left-padded) row, prompt-major; return each
    continuation's new tokens, through its first EOS.

    Each prompt is encoded once and its KV cache repeated for its copies. Rows that hit EOS
    leave the batch: once a quarter of the batch has finished, the finished rows are dropped
    from the inputs and the KV cache, so later steps only run live rows.
    """
    max_new = int(gen_kwargs["max_new_tokens"])
    rows = input_ids.shape[0] * copies
    out: list[list[int]] = [[] for _ in range(rows)]
    if max_new <= 0 or rows == 0:
        return out
    device = input_ids.device
    eos = torch.tensor(sorted(eos_ids), dtype=torch.long, device=device)
    keep_logits = {"logits_to_keep": 1} if _forward_takes(type(model), "logits_to_keep") else {}
    cache_arg = _cache_argument(type(model))

    def prefill(ids: torch.Tensor, mask: torch.Tensor):
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        res = model(
            input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **keep_logits
        )
        return res, _returned_cache(res), pos

    result, cache, positions = prefill(input_ids, attention_mask)
    logits = result.logits[:, -1, :].float()
    mask = attention_mask
    if copies > 1:
        if hasattr(cache, "batch_repeat_interleave"):
            cache.batch_repeat_interleave(copies)
            logits = logits.repeat_interleave(copies, dim=0)
            positions = positions.repeat_interleave(copies, dim=0)
            mask = mask.repeat_interleave(copies, dim=0)
        else:  # a cache that cannot be repeated: encode every copy
            mask = attention_mask.repeat_interleave(copies, dim=0)
            result, cache, positions = prefill(input_ids.repeat_interleave(copies, dim=0), mask)
            logits = result.logits[:, -1, :].float()
    can_drop = hasattr(cache, "batch_select_indices")
    owner = torch.arange(rows, device=device)  # original row of each batch row
    live = torch.ones(rows, dtype=torch.bool, device=device)
    last_pos = positions[:, -1]
    for step in range(max_new):
        tokens = _next_tokens(logits, gen_kwargs, owner, rows, generator)
        for r, t in zip(owner[live].tolist(), tokens[live].tolist()):
            out[r].append(t)
        if eos.numel():
            live = live & ~torch.isin(tokens, eos)
        if step + 1 == max_new or not bool(live.any()):
            break
        if can_drop and int(live.sum()) * 4 <= 3 * live.numel():
            keep = live.nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            owner, tokens, mask, last_pos = owner[keep], tokens[keep], mask[keep], last_pos[keep]
            live = live[keep]
        # Finished rows still in the batch are fed a pad; their outputs are ignored.
        tokens = torch.where(live, tokens, torch.full_like(tokens, pad_id))
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        last_pos = last_pos + 1
        result = model(
            input_ids=tokens[:, None],
            attention_mask=mask,
            position_ids=last_pos[:, None],
            use_cache=True,
            **{cache_arg: cache},
            **keep_logits,
        )
        cache = _returned_cache(result)
        logits = result.logits[:, -1, :].float()
    return out


def _cache_argument(model_cls: type) -> str | None:
    """The forward argument that takes the KV cache (transformers renamed it over versions)."""
    for name in ("cache", "past_key_values"):
        if _forward_takes(model_cls, name):
            return name
    return None


def _returned_cache(result):
    cache = getattr(result, "cache", None)
    return cache if cache is not None else getattr(result, "past_key_values", None)


@functools.cache
def _forward_takes(model_cls: type, name: str) -> bool:
    try:
        return name in inspect.signature(model_cls.forward).parameters
    except (TypeError, ValueError):
        return False


def sample_rows(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    num_samples: int,
    gen_kwargs: dict[str, Any],
    eos_ids: set[int],
    pad_id: int,
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """``num_samples`` completions per left-padded prompt row (prompt-major), each trimmed
    after its first EOS. Uses :func:`decode_compacting` when it matches ``generate``.

    ``generator`` seeds the draws of :func:`decode_compacting`; ``model.generate`` always draws
    from the process-wide generator, so a caller that needs a seed on that path seeds it
    (see :class:`~comlrl.core.rollout.backend.HFBackend`)."""
    # Greedy decoding of K > 1 copies is rejected by ``generate``; leave that error to it.
    greedy_copies = not gen_kwargs.get("do_sample") and num_samples > 1
    if not greedy_copies and supports_compacting(model, gen_kwargs):
        rows = decode_compacting(
            model,
            input_ids,
            attention_mask,
            gen_kwargs,
            eos_ids,
            pad_id,
            copies=num_samples,
            generator=generator,
        )
        return [trim_completion(r, eos_ids, pad_id) for r in rows]
    out = model.generate(
        input_ids=input_ids,
        attention_mask=attention_mask,
        num_return_sequences=num_samples,
        pad_token_id=pad_id,
        eos_token_id=sorted(eos_ids) if eos_ids else None,
        return_dict_in_generate=False,
        **gen_kwargs,
    )
    new = out[:, input_ids.shape[1] :].tolist()
    return [trim_completion(r, eos_ids, pad_id) for r in new]


def generate_samples(
    model,
    tokenizer,
    prompts: Sequence[str],
    num_samples: int,
    params: SamplingParams,
    *,
    max_sequences_per_call: int | None = None,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    generator: torch.Generator | None = None,
) -> list[PromptSamples]:
    """Sample ``num_samples`` completions for every prompt.

    All prompts × samples go into one ``generate`` call unless ``max_sequences_per_call`` caps
    the batch (a memory budget); then prompts are chunked, keeping each prompt's samples together.
    The model's training mode and ``requires_grad`` flags are restored afterwards.
    ``generator`` supplies the sampling draws of the compacting decoder (see
    :func:`sample_rows`).
    """
    if not prompts:
        return []
    ids_per_prompt = (
        list(prompt_ids) if prompt_ids is not None else tokenize_prompts(tokenizer, prompts)
    )
    device = next(model.parameters()).device
    eos_ids = _eos_ids(tokenizer, model)
    pad_id = tokenizer.pad_token_id
    per_call = (
        len(prompts)
        if not max_sequences_per_call
        else max(1, max_sequences_per_call // num_samples)
    )
    gen_kwargs = params.generate_kwargs()
    was_training = model.training
    model.eval()
    results: list[PromptSamples] = []
    try:
        with torch.inference_mode():
            for start in range(0, len(prompts), per_call):
                chunk = ids_per_prompt[start : start + per_call]
                ids, mask = left_pad(chunk, pad_id)
                new = sample_rows(
                    model,
                    ids.to(device),
                    mask.to(device),
                    num_samples,
                    gen_kwargs,
                    eos_ids,
                    pad_id,
                    generator,
                )
                for j, p_ids in enumerate(chunk):
                    rows = new[j * num_samples : (j + 1) * num_samples]
                    texts = tokenizer.batch_decode(rows, skip_special_tokens=True)
                    results.append(PromptSamples(prompts[start + j], list(p_ids), rows, texts))
    finally:
        model.train(was_training)
    return results
