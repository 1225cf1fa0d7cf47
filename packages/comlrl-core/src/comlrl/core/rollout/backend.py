"""Where completions come from: the :class:`RolloutBackend` protocol and the default backend,
which decodes with the agents' own Hugging Face models.

The seam is token ids in, token ids out: :meth:`RolloutBackend.generate_ids` takes each
prompt's token ids and returns each completion's token ids, with the sampler's per-token
log-probs where the backend has them (a diagnostic: every loss scores with the trainer's own
engine, at the sampling temperature, so losses never depend on the backend). The text form,
:meth:`RolloutBackend.generate`, which the rollout tree and evaluation call, is the same
request with the agent's tokenizer on both ends; :class:`TokenBackend` supplies it for any
backend that implements the ids form.

A backend that keeps its own copy of the weights (vLLM, say) hears about every optimizer step
through :meth:`RolloutBackend.on_weights_updated`, which :func:`comlrl.core.training.optim.apply_step`
calls. Backends are chosen by the ``rollout_backend`` config field; see
:mod:`comlrl.core.rollout.backends` for the registry and docs/rollout_backends.md.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from comlrl.core.rollout.generation import (
    PromptSamples,
    SamplingParams,
    sample_completion_ids,
    supports_compacting,
    tokenize_prompts,
)

# ``model.generate`` draws from the process-wide generator; seeded requests that must go
# through it take turns, so each seed governs exactly its own call.
_GLOBAL_RNG_LOCK = threading.Lock()


@dataclass
class SampledIds:
    """The ``n`` completions of one prompt, as token ids.

    ``completion_ids[j]`` ends with its EOS token when the row finished, and holds at most
    ``max_new_tokens`` tokens. ``logprobs[j][t]`` (when the backend reports them) is the
    sampler's log-probability of token ``completion_ids[j][t]``.
    """

    prompt_ids: list[int]
    completion_ids: list[list[int]]
    logprobs: list[list[float]] | None = None


@runtime_checkable
class RolloutBackend(Protocol):
    """Samples completions for one agent at a time."""

    def generate_ids(
        self,
        agent: int,
        prompt_ids: Sequence[Sequence[int]],
        n: int,
        params: SamplingParams,
        seeds: Sequence[int] | None = None,
    ) -> list[SampledIds]:
        """``n`` completions of each prompt (token ids) by ``agent``, one record per prompt in
        order. With ``seeds`` (one per prompt), each prompt's samples depend on its seed only,
        not on what else is in the batch."""
        ...

    def generate(
        self,
        agent: int,
        prompts: Sequence[str],
        n: int,
        params: SamplingParams,
        seeds: Sequence[int] | None = None,
    ) -> list[PromptSamples]:
        """:meth:`generate_ids` for text prompts: tokenized and decoded with ``agent``'s
        tokenizer."""
        ...

    def on_weights_updated(self, agent: int, model: torch.nn.Module) -> None:
        """``agent``'s weights changed (after an optimizer step)."""
        ...


def prompt_samples(tokenizer, prompts: Sequence[str], sampled: Sequence[SampledIds]):
    """The text records of sampled ids: each prompt with its ids, completions and their text."""
    return [
        PromptSamples(
            prompt,
            list(s.prompt_ids),
            s.completion_ids,
            tokenizer.batch_decode(s.completion_ids, skip_special_tokens=True),
            s.logprobs,
        )
        for prompt, s in zip(prompts, sampled)
    ]


def check_seeds(seeds: Sequence[int] | None, prompts: Sequence) -> None:
    """One seed per prompt, or none."""
    if seeds is not None and len(seeds) != len(prompts):
        raise ValueError(f"seeds has {len(seeds)} entries for {len(prompts)} prompts.")


class TokenBackend:
    """Base of backends that implement :meth:`RolloutBackend.generate_ids`: supplies the text
    form with the agents' tokenizers (``self.tokenizers``), so text in and text out is the
    same sampling as ids in and ids out. Records keep the exact ids the backend returned."""

    tokenizers: Sequence

    def generate_ids(self, agent, prompt_ids, n, params, seeds=None) -> list[SampledIds]:
        """See :meth:`RolloutBackend.generate_ids`."""
        raise NotImplementedError

    def generate(self, agent, prompts, n, params, seeds=None) -> list[PromptSamples]:
        """See :meth:`RolloutBackend.generate`."""
        if not prompts:
            return []
        check_seeds(seeds, prompts)
        tokenizer = self.tokenizers[agent]
        ids = tokenize_prompts(tokenizer, prompts, getattr(params, "max_prompt_length", None))
        return prompt_samples(tokenizer, prompts, self.generate_ids(agent, ids, n, params, seeds))

    def on_weights_updated(self, agent: int, model: torch.nn.Module) -> None:
        """Nothing to do by default (a backend decoding with the trained model itself)."""


class HFBackend(TokenBackend):
    """Decoding with the trainer's own models and tokenizers (the default backend, ``hf``).

    Unseeded requests decode every prompt × ``n`` together, in chunks of at most
    ``max_sequences_per_call`` sequences. Seeded requests decode prompt by prompt, each with a
    ``torch.Generator`` of its own, so concurrent agents never share random state; only a model
    that the compacting decoder cannot serve (beam search, extra logits processors) falls back
    to ``model.generate`` under a lock on the process-wide generator. ``fast_path`` is the
    ``decode_fast_path`` setting (see :mod:`comlrl.core.rollout.static_decode`). It reports no
    sampler log-probs: the trainer scores the same model itself. Agents that are adapters of
    one base decode together in mixed-adapter calls (:meth:`generate_joint`,
    :mod:`comlrl.core.rollout.mixed_adapters`) unless ``mixed_adapters`` is False.
    """

    def __init__(
        self,
        models: Sequence,
        tokenizers: Sequence,
        max_sequences_per_call=None,
        fast_path: str = "auto",
        mixed_adapters: bool = True,
    ):
        self.models = models
        self.tokenizers = tokenizers
        self.max_sequences_per_call = max_sequences_per_call
        self.fast_path = fast_path
        # Decided once: whether the agents are adapters of one base that can decode together.
        self.mixed = None
        if mixed_adapters and _may_be_adapters(models):
            from comlrl.core.rollout.mixed_adapters import shared_adapters

            self.mixed = shared_adapters(models, tokenizers)

    def generate_joint(
        self, prompts_per_agent: Sequence[Sequence[str]], n: int, params: SamplingParams
    ) -> list[list[PromptSamples]] | None:
        """Every agent's ``n`` samples of its prompts in mixed-adapter calls, ``[agent][prompt]``,
        when the agents are adapters of one base (see :mod:`comlrl.core.rollout.mixed_adapters`);
        None when they cannot be mixed, and the caller asks agent by agent. Unseeded only."""
        if self.mixed is None or not params.do_sample and n > 1:
            return None
        from comlrl.core.rollout.mixed_adapters import sample_mixed

        shared, names = self.mixed
        limit = getattr(params, "max_prompt_length", None)
        ids = [
            tokenize_prompts(tok, prompts, limit) if prompts else []
            for tok, prompts in zip(self.tokenizers, prompts_per_agent)
        ]
        rows = sample_mixed(
            shared, names, self.tokenizers[0], ids, n, params, self.max_sequences_per_call
        )
        return [
            prompt_samples(tok, prompts, [SampledIds(p, r) for p, r in zip(agent_ids, agent_rows)])
            for tok, prompts, agent_ids, agent_rows in zip(
                self.tokenizers, prompts_per_agent, ids, rows
            )
        ]

    def generate_ids(self, agent, prompt_ids, n, params, seeds=None) -> list[SampledIds]:
        """See :meth:`RolloutBackend.generate_ids`."""
        model, tokenizer = self.models[agent], self.tokenizers[agent]
        prompt_ids = [list(p) for p in prompt_ids]
        check_seeds(seeds, prompt_ids)
        if seeds is None:
            rows = sample_completion_ids(
                model,
                tokenizer,
                prompt_ids,
                n,
                params,
                max_sequences_per_call=self.max_sequences_per_call,
                fast_path=self.fast_path,
            )
            return [SampledIds(p, r) for p, r in zip(prompt_ids, rows)]
        device = next(model.parameters()).device
        own_generator = params.do_sample and supports_compacting(model, params.generate_kwargs())
        out: list[SampledIds] = []
        for ids, seed in zip(prompt_ids, seeds):
            if own_generator:
                gen = torch.Generator(device=device).manual_seed(seed)
                rows = sample_completion_ids(
                    model, tokenizer, [ids], n, params, generator=gen, fast_path=self.fast_path
                )
            else:
                devices = [device] if device.type == "cuda" else []
                with _GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=devices):
                    torch.manual_seed(seed)
                    rows = sample_completion_ids(
                        model, tokenizer, [ids], n, params, fast_path=self.fast_path
                    )
            out.append(SampledIds(ids, rows[0]))
        return out


def _may_be_adapters(models: Sequence) -> bool:
    # Adapter views carry their adapter's name; plain models never import the adapter code.
    return len(models) > 1 and all(hasattr(m, "adapter_name") for m in models)
