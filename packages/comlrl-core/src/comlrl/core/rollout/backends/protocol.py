"""The rollout-backend contract: what a backend implements and what it is built from.

A backend samples completions for one agent at a time, token ids in, token ids out
(:meth:`RolloutBackend.generate_ids`), and hears about every optimizer step
(:meth:`RolloutBackend.on_weights_updated`), so one that keeps its own copy of the weights
(vLLM, say) can refresh it. That is the whole contract. The ``rollout_backend`` config field
chooses one by name among the registered backends (:mod:`.registry`), whose factory builds it
from a :class:`BackendInputs`. Text prompts reach a backend through the agents' tokenizers
(:mod:`.text`), so a backend never sees text.

Sampler log-probs, when a backend returns them, are a diagnostic only: every loss scores with
the trainer's own models at the sampling temperature, so the choice of backend changes speed,
never the math.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

    from comlrl.core.config.base import CommonConfig
    from comlrl.core.rollout.generation import SamplingParams


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
    """What every rollout backend implements (built-in ``hf`` and ``vllm``, and plugins)."""

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

    def on_weights_updated(self, agent: int, model: torch.nn.Module) -> None:
        """``agent``'s weights changed (called after each of its optimizer steps); ``model``
        is the trained agent as it is now."""
        ...


@dataclass(frozen=True)
class BackendInputs:
    """What a backend factory builds a backend from, once the agents are loaded.

    ``agents`` and ``tokenizers`` are the trained models and their tokenizers, by agent
    index; ``args`` is the run's config (its ``rollout_backend_options`` holds the backend's
    own settings; ``seed``, ``generation_batch_size`` and ``decode_fast_path`` are there
    too); ``fsdp`` says whether the agents will be FSDP-sharded (a backend that needs whole
    models refuses them).
    """

    agents: Sequence[Any]
    tokenizers: Sequence[Any]
    args: CommonConfig
    fsdp: bool = False


def check_seeds(seeds: Sequence[int] | None, prompts: Sequence) -> None:
    """One seed per prompt, or none."""
    if seeds is not None and len(seeds) != len(prompts):
        raise ValueError(f"seeds has {len(seeds)} entries for {len(prompts)} prompts.")
