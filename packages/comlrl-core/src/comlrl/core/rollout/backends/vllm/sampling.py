"""Our sampling settings as ``vllm.SamplingParams`` keyword arguments, one to one.

Mapped: temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens (``max_tokens``),
the per-request seed, ``n``, and stopping at the agent's EOS ids (``stop_token_ids``). Greedy
decoding is ``temperature=0``. The sampler's log-prob of each sampled token is requested
(``logprobs=0``) as a diagnostic. A ``train(**kwargs)`` generation keyword that vLLM cannot honour
the same way is an error naming it, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# ``train(**kwargs)`` keywords read here (HF ``generate`` names); anything else has no
# one-to-one vLLM meaning for this backend.
SUPPORTED_EXTRA = (
    "do_sample",
    "max_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "num_beams",
)
FIELD = "generation kwargs (train(**kwargs))"


def _setting(params: Any, name: str, default: Any) -> Any:
    # ``extra`` (train(**kwargs)) wins over the config, as it does for model.generate; config
    # fields that a config may lack (min_p, repetition_penalty) are read with a default.
    if name in params.extra and params.extra[name] is not None:
        return params.extra[name]
    value = getattr(params, name, None)
    return default if value is None else value


def sampling_kwargs(
    params: Any,
    *,
    n: int,
    seed: int | None = None,
    eos_ids: Iterable[int] = (),
    logprobs: bool = True,
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for ``n`` samples of one prompt under
    ``params`` (a :class:`~comlrl.core.rollout.generation.SamplingParams`).

    ``seed`` makes the request reproducible on its own; ``eos_ids`` are the ids that end a
    completion (kept in the output, as the HF backend keeps them)."""
    unknown = sorted(k for k in params.extra if k not in SUPPORTED_EXTRA)
    if unknown:
        raise ValueError(
            f"{FIELD} {unknown} have no vLLM equivalent in rollout_backend='vllm'; valid: "
            f"{', '.join(SUPPORTED_EXTRA)} (or use rollout_backend='hf')."
        )
    if int(params.extra.get("num_beams") or 1) != 1:
        raise ValueError(
            f"{FIELD} num_beams={params.extra['num_beams']} (beam search) is not a sampler "
            "setting of rollout_backend='vllm'; valid: 1 (or use rollout_backend='hf')."
        )
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}.")
    do_sample = bool(_setting(params, "do_sample", True))
    max_tokens = int(_setting(params, "max_new_tokens", 256))
    if max_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_tokens}.")
    kwargs: dict[str, Any] = dict(
        n=n,
        max_tokens=max_tokens,
        repetition_penalty=float(_setting(params, "repetition_penalty", 1.0)),
        stop_token_ids=sorted({int(i) for i in eos_ids}),
        seed=seed,
        # The sampled token's log-prob comes back with every token (0 extra alternatives).
        logprobs=0 if logprobs else None,
        # Token ids out: our tokenizer decodes, exactly as for the HF backend.
        detokenize=False,
    )
    if not do_sample:
        if n > 1:
            raise ValueError(
                f"greedy decoding (do_sample=False) of n={n} copies of one prompt gives n "
                "identical rows; sample (do_sample=True) or ask for n=1."
            )
        kwargs.update(temperature=0.0, top_p=1.0, top_k=-1, min_p=0.0)
        return kwargs
    temperature = float(_setting(params, "temperature", 1.0))
    if temperature <= 0:
        raise ValueError(
            f"temperature must be above 0 when sampling, got {temperature} (greedy decoding "
            "is do_sample=False)."
        )
    top_k = _setting(params, "top_k", None)
    kwargs.update(
        temperature=temperature,
        top_p=float(_setting(params, "top_p", 1.0)),
        # vLLM disables top-k with -1 (every release; 0 only in newer ones), as HF does with 0.
        top_k=-1 if top_k in (None, 0) else int(top_k),
        min_p=float(_setting(params, "min_p", 0.0)),
    )
    return kwargs
