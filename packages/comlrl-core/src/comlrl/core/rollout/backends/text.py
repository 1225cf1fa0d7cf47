"""Text in, text out, on top of any backend's ids: how core samples from text prompts.

Core's rollouts and evaluation hold prompts as text; a backend speaks token ids
(:meth:`~.protocol.RolloutBackend.generate_ids`). :class:`TextSampling` joins the two with the
agent's tokenizer on both ends, so text sampling is exactly ids sampling and the records keep
the ids the backend returned. The built-in backends derive from it; the registry gives any
other backend the text form with :func:`with_text` when it builds it, so a plugin implements the protocol only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from comlrl.core.rollout.backends.protocol import RolloutBackend, SampledIds, check_seeds
from comlrl.core.rollout.generation import PromptSamples, tokenize_prompts

if TYPE_CHECKING:
    import torch

    from comlrl.core.rollout.generation import SamplingParams


def prompt_samples(
    tokenizer: Any, prompts: Sequence[str], sampled: Sequence[SampledIds]
) -> list[PromptSamples]:
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


class TextSampling:
    """Base of backends that also take text: :meth:`generate` tokenizes with
    ``self.tokenizers[agent]``, calls :meth:`generate_ids` and decodes. A subclass implements
    :meth:`generate_ids`; :meth:`on_weights_updated` does nothing unless overridden (a backend
    that decodes with the trained models themselves), and :meth:`drain_metrics` has nothing
    to report unless overridden."""

    tokenizers: Sequence[Any]

    def generate_ids(
        self,
        agent: int,
        prompt_ids: Sequence[Sequence[int]],
        n: int,
        params: SamplingParams,
        seeds: Sequence[int] | None = None,
    ) -> list[SampledIds]:
        """See :meth:`~.protocol.RolloutBackend.generate_ids`."""
        raise NotImplementedError

    def generate(
        self,
        agent: int,
        prompts: Sequence[str],
        n: int,
        params: SamplingParams,
        seeds: Sequence[int] | None = None,
    ) -> list[PromptSamples]:
        """:meth:`generate_ids` for text prompts, tokenized (and cut to the params'
        ``max_prompt_length``) and decoded with ``agent``'s tokenizer."""
        if not prompts:
            return []
        check_seeds(seeds, prompts)
        tokenizer = self.tokenizers[agent]
        ids = tokenize_prompts(tokenizer, prompts, getattr(params, "max_prompt_length", None))
        return prompt_samples(tokenizer, prompts, self.generate_ids(agent, ids, n, params, seeds))

    def on_weights_updated(self, agent: int, model: torch.nn.Module) -> None:
        """See :meth:`~.protocol.RolloutBackend.on_weights_updated`; nothing to do here."""

    def drain_metrics(self) -> dict[str, float]:
        """The backend's diagnostics since the previous call, added to the next training
        record (none here)."""
        return {}


class WithText(TextSampling):
    """A backend that implements the protocol only, given the text form with the agents'
    tokenizers. ``backend`` is the wrapped backend."""

    def __init__(self, backend: RolloutBackend, tokenizers: Sequence[Any]):
        self.backend = backend
        self.tokenizers = tokenizers

    def generate_ids(
        self,
        agent: int,
        prompt_ids: Sequence[Sequence[int]],
        n: int,
        params: SamplingParams,
        seeds: Sequence[int] | None = None,
    ) -> list[SampledIds]:
        """The wrapped backend's :meth:`~.protocol.RolloutBackend.generate_ids`."""
        return self.backend.generate_ids(agent, prompt_ids, n, params, seeds)

    def on_weights_updated(self, agent: int, model: torch.nn.Module) -> None:
        """The wrapped backend's :meth:`~.protocol.RolloutBackend.on_weights_updated`."""
        self.backend.on_weights_updated(agent, model)

    def drain_metrics(self) -> dict[str, float]:
        """The wrapped backend's ``drain_metrics()`` when it has one (optional)."""
        drain = getattr(self.backend, "drain_metrics", None)
        return dict(drain()) if drain is not None else {}


def with_text(backend: RolloutBackend, tokenizers: Sequence[Any]) -> TextSampling:
    """``backend`` with the text form: itself when it derives from :class:`TextSampling`,
    otherwise wrapped in :class:`WithText` over ``tokenizers``."""
    return backend if isinstance(backend, TextSampling) else WithText(backend, tokenizers)
