"""Where completions come from: the :class:`RolloutBackend` protocol and the default backend,
which decodes with the agents' own Hugging Face models.

Every generation call site (training rollouts, evaluation, the preference family's comparators)
asks a backend for samples. A backend that keeps its own copy of the weights (a vLLM or SGLang
server, say) hears about every optimizer step through :meth:`RolloutBackend.on_weights_updated`,
which :func:`comlrl.core.optim.apply_step` calls.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch

from comlrl.core.rollout.generation import (
    PromptSamples,
    SamplingParams,
    generate_samples,
    supports_compacting,
)

# ``model.generate`` draws from the process-wide generator; seeded requests that must go
# through it take turns, so each seed governs exactly its own call.
_GLOBAL_RNG_LOCK = threading.Lock()


@runtime_checkable
class RolloutBackend(Protocol):
    """Samples completions for one agent at a time."""

    def generate(
        self,
        agent: int,
        prompts: Sequence[str],
        n: int,
        params: SamplingParams,
        seeds: Sequence[int] | None = None,
    ) -> list[PromptSamples]:
        """``n`` completions of each prompt by ``agent``. With ``seeds`` (one per prompt), each
        prompt's samples depend on its seed only, not on what else is in the batch."""
        ...

    def on_weights_updated(self, agent: int, model: torch.nn.Module) -> None:
        """``agent``'s weights changed (after an optimizer step)."""
        ...


class HFBackend:
    """Decoding with the trainer's own models and tokenizers (the default backend).

    Unseeded requests decode every prompt × ``n`` together, in chunks of at most
    ``max_sequences_per_call`` sequences. Seeded requests decode prompt by prompt, each with a
    ``torch.Generator`` of its own, so concurrent agents never share random state; only a model
    that the compacting decoder cannot serve (beam search, extra logits processors) falls back
    to ``model.generate`` under a lock on the process-wide generator. ``fast_path`` is the
    ``decode_fast_path`` setting (see :mod:`comlrl.core.rollout.static_decode`).
    """

    def __init__(
        self,
        models: Sequence,
        tokenizers: Sequence,
        max_sequences_per_call=None,
        fast_path: str = "auto",
    ):
        self.models = models
        self.tokenizers = tokenizers
        self.max_sequences_per_call = max_sequences_per_call
        self.fast_path = fast_path

    def generate(self, agent, prompts, n, params, seeds=None) -> list[PromptSamples]:
        """See :meth:`RolloutBackend.generate`."""
        model, tokenizer = self.models[agent], self.tokenizers[agent]
        if seeds is None:
            return generate_samples(
                model,
                tokenizer,
                prompts,
                n,
                params,
                max_sequences_per_call=self.max_sequences_per_call,
                fast_path=self.fast_path,
            )
        if len(seeds) != len(prompts):
            raise ValueError(f"seeds has {len(seeds)} entries for {len(prompts)} prompts.")
        device = next(model.parameters()).device
        own_generator = params.do_sample and supports_compacting(model, params.generate_kwargs())
        out: list[PromptSamples] = []
        for prompt, seed in zip(prompts, seeds):
            if own_generator:
                gen = torch.Generator(device=device).manual_seed(seed)
                out.extend(
                    generate_samples(
                        model,
                        tokenizer,
                        [prompt],
                        n,
                        params,
                        generator=gen,
                        fast_path=self.fast_path,
                    )
                )
                continue
            devices = [device] if device.type == "cuda" else []
            with _GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=devices):
                torch.manual_seed(seed)
                out.extend(
                    generate_samples(
                        model, tokenizer, [prompt], n, params, fast_path=self.fast_path
                    )
                )
        return out

    def on_weights_updated(self, agent: int, model: torch.nn.Module) -> None:
        """Nothing to do: this backend decodes with the trained model itself."""
