"""The default rollout backend, ``hf``: decoding with the agents' own Hugging Face models.

It implements :class:`~.protocol.RolloutBackend` with the trainer's models and tokenizers
(the text form from :class:`~.text.TextSampling`); the registry (:mod:`.registry`) builds it
for ``rollout_backend: hf``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import torch

from comlrl.core.rollout.backends.protocol import SampledIds, check_seeds
from comlrl.core.rollout.backends.text import TextSampling, prompt_samples
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


class HFBackend(TextSampling):
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

    def generate_ids(
        self,
        agent: int,
        prompt_ids: Sequence[Sequence[int]],
        n: int,
        params: SamplingParams,
        seeds: Sequence[int] | None = None,
    ) -> list[SampledIds]:
        """See :meth:`~.protocol.RolloutBackend.generate_ids`."""
        model, tokenizer = self.models[agent], self.tokenizers[agent]
        rows_in = [list(p) for p in prompt_ids]
        check_seeds(seeds, rows_in)
        if seeds is None:
            rows = sample_completion_ids(
                model,
                tokenizer,
                rows_in,
                n,
                params,
                max_sequences_per_call=self.max_sequences_per_call,
                fast_path=self.fast_path,
            )
            return [SampledIds(p, r) for p, r in zip(rows_in, rows)]
        device = next(model.parameters()).device
        own_generator = params.do_sample and supports_compacting(model, params.generate_kwargs())
        out: list[SampledIds] = []
        for ids, seed in zip(rows_in, seeds):
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
