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

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from comlrl.core.rollout.chat import encode_prompts
from comlrl.core.rollout.decoding import decode_compacting, supports_compacting
from comlrl.core.rollout.static_decode import choose_decoder, decode_static


@dataclass
class SamplingParams:
    """Sampling settings shared by training rollouts (eval may use a greedy copy)."""

    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    min_p: float | None = None
    repetition_penalty: float | None = None
    max_prompt_length: int | None = None
    do_sample: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(
        cls, args: Any, overrides: dict | None = None, *, eval_mode: bool = False
    ) -> SamplingParams:
        """The sampling settings of a config (plus ``train(**kwargs)`` overrides); greedy in
        evaluation when ``eval_greedy`` is set."""
        return cls(
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            min_p=args.min_p,
            repetition_penalty=args.repetition_penalty,
            max_prompt_length=args.max_prompt_length,
            do_sample=not (eval_mode and args.eval_greedy),
            extra=dict(overrides or {}),
        )

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
        penalty = self.repetition_penalty
        kwargs.update(
            repetition_penalty=penalty if penalty not in (None, 1.0) else None,
            no_repeat_ngram_size=None,
        )
        if self.do_sample and self.min_p:
            kwargs["min_p"] = self.min_p
        kwargs.update({k: v for k, v in self.extra.items() if k != "do_sample"})
        return {k: v for k, v in kwargs.items() if v is not None or k in self.extra}


@dataclass
class PromptSamples:
    """K sampled completions of one prompt."""

    prompt: str
    prompt_ids: list[int]
    completion_ids: list[list[int]]
    texts: list[str]
    # Per completion token, the log-prob the backend's sampler gave it (None: the backend
    # reports none, as the HF backend). A diagnostic only: losses use the trainer's own scores.
    sampler_logprobs: list[list[float]] | None = None

    @property
    def num_tokens(self) -> int:
        return sum(len(c) for c in self.completion_ids)


def truncate_prompt_ids(ids: list[list[int]], max_length: int | None) -> list[list[int]]:
    """``ids`` cut from the left to ``max_length`` tokens each (``max_prompt_length``), with one
    warning that counts the prompts cut (the end of a prompt is what a completion follows)."""
    if not max_length:
        return ids
    cut = sum(len(x) > max_length for x in ids)
    if cut:
        longest = max(len(x) for x in ids)
        warnings.warn(
            f"{cut} of {len(ids)} prompts were longer than max_prompt_length={max_length} "
            f"tokens (the longest: {longest}) and lost their first tokens.",
            UserWarning,
            stacklevel=4,
        )
    return [x[-max_length:] for x in ids]


def tokenize_prompts(tokenizer, prompts: Sequence[str], max_length: int | None = None):
    """Token ids of each prompt (no padding); truncated from the left to ``max_length`` by
    :func:`truncate_prompt_ids`. Templated prompts are encoded without adding special tokens
    again (one BOS, not two)."""
    ids = encode_prompts(tokenizer, prompts)
    for p, x in zip(prompts, ids):
        if not x:
            raise ValueError(f"Prompt {p!r} tokenized to zero tokens; formatters must return text.")
    return truncate_prompt_ids(ids, max_length)


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


def eos_ids_of(tokenizer, model) -> set[int]:
    """Every end-of-sequence id of ``tokenizer`` and ``model``'s generation config."""
    ids: set[int] = set()
    for value in (tokenizer.eos_token_id, getattr(model.generation_config, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids


def sample_rows(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    num_samples: int,
    gen_kwargs: dict[str, Any],
    eos_ids: set[int],
    pad_id: int,
    generator: torch.Generator | None = None,
    fast_path: str = "auto",
) -> list[list[int]]:
    """``num_samples`` completions per left-padded prompt row (prompt-major), each trimmed
    after its first EOS. Uses :func:`decode_compacting` when it matches ``generate``: with the
    direct decode step (:mod:`comlrl.core.rollout.direct_step`) or ``model.forward``, or its
    static-cache, compiled twin, as ``fast_path`` (``decode_fast_path``) selects (see
    :func:`comlrl.core.rollout.static_decode.choose_decoder`).

    ``generator`` seeds the draws of :func:`decode_compacting`; ``model.generate`` always draws
    from the process-wide generator, so a caller that needs a seed on that path seeds it
    (see :class:`~comlrl.core.rollout.backends.hf.HFBackend`)."""
    # Greedy decoding of K > 1 copies is rejected by ``generate``; leave that error to it.
    greedy_copies = not gen_kwargs.get("do_sample") and num_samples > 1
    if not greedy_copies and supports_compacting(model, gen_kwargs):
        decoder = choose_decoder(model, gen_kwargs, fast_path)
        args = (model, input_ids, attention_mask, gen_kwargs, eos_ids, pad_id, num_samples)
        if decoder == "static":
            rows = decode_static(*args, generator)
        else:
            rows = decode_compacting(*args, generator, direct=decoder == "direct")
        return [trim_completion(r, eos_ids, pad_id) for r in rows]
    return generate_rows(model, input_ids, attention_mask, num_samples, gen_kwargs, eos_ids, pad_id)


def generate_rows(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    num_samples: int,
    gen_kwargs: dict[str, Any],
    eos_ids: set[int],
    pad_id: int,
    **forward_kwargs: Any,
) -> list[list[int]]:
    """``num_samples`` completions per left-padded prompt row by ``model.generate`` (prompt-
    major), each trimmed after its first EOS; ``forward_kwargs`` go to ``generate`` as well
    (peft's per-row ``adapter_names``, say)."""
    out = model.generate(
        input_ids=input_ids,
        attention_mask=attention_mask,
        num_return_sequences=num_samples,
        pad_token_id=pad_id,
        eos_token_id=sorted(eos_ids) if eos_ids else None,
        return_dict_in_generate=False,
        **gen_kwargs,
        **forward_kwargs,
    )
    new = out[:, input_ids.shape[1] :].tolist()
    return [trim_completion(r, eos_ids, pad_id) for r in new]


def sample_completion_ids(
    model,
    tokenizer,
    prompt_ids: Sequence[Sequence[int]],
    num_samples: int,
    params: SamplingParams,
    *,
    max_sequences_per_call: int | None = None,
    generator: torch.Generator | None = None,
    fast_path: str = "auto",
) -> list[list[list[int]]]:
    """Token ids in, token ids out: ``num_samples`` completions (each trimmed after its first
    EOS) for every prompt given as token ids, in prompt order.

    All prompts × samples go into one decoding call unless ``max_sequences_per_call`` caps
    the batch (a memory budget); then prompts are chunked, keeping each prompt's samples together.
    The model's training mode and ``requires_grad`` flags are restored afterwards.
    ``generator`` supplies the sampling draws of the compacting decoder (see
    :func:`sample_rows`); ``fast_path`` is the ``decode_fast_path`` setting. ``tokenizer``
    gives the pad and EOS ids only.
    """
    if not prompt_ids:
        return []
    device = next(model.parameters()).device
    eos_ids = eos_ids_of(tokenizer, model)
    pad_id = tokenizer.pad_token_id
    per_call = (
        len(prompt_ids)
        if not max_sequences_per_call
        else max(1, max_sequences_per_call // num_samples)
    )
    gen_kwargs = params.generate_kwargs()
    was_training = model.training
    model.eval()
    results: list[list[list[int]]] = []
    try:
        with torch.inference_mode():
            for start in range(0, len(prompt_ids), per_call):
                chunk = prompt_ids[start : start + per_call]
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
                    fast_path,
                )
                for j in range(len(chunk)):
                    results.append(new[j * num_samples : (j + 1) * num_samples])
    finally:
        model.train(was_training)
    return results


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
    fast_path: str = "auto",
) -> list[PromptSamples]:
    """Sample ``num_samples`` completions for every prompt (text in, records out): the
    prompts are tokenized (unless ``prompt_ids`` are given), sampled by
    :func:`sample_completion_ids` with the same arguments, and each completion decoded."""
    if not prompts:
        return []
    ids_per_prompt = (
        list(prompt_ids) if prompt_ids is not None else tokenize_prompts(tokenizer, prompts)
    )
    rows_per_prompt = sample_completion_ids(
        model,
        tokenizer,
        ids_per_prompt,
        num_samples,
        params,
        max_sequences_per_call=max_sequences_per_call,
        generator=generator,
        fast_path=fast_path,
    )
    return [
        PromptSamples(
            prompt, list(p_ids), rows, tokenizer.batch_decode(rows, skip_special_tokens=True)
        )
        for prompt, p_ids, rows in zip(prompts, ids_per_prompt, rows_per_prompt)
    ]
