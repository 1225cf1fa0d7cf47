"""The real engine: a colocated ``vllm.LLM`` in this process. The only module that imports
vLLM, and only when an engine is built.

The engine runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` unless set), so trained
weights load straight into its model through the model's own ``load_weights`` (the path TRL's
colocate mode uses). Prompts go in as token ids (``TokensPrompt``; the engine skips its own
tokenizer) and completions come back as token ids with the sampled tokens' log-probs, taken
after temperature and truncation where the installed vLLM offers ``logprobs_mode``.

Not run on a GPU in this repository's CI: see docs/performance.md, "GPU check".
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Any

from comlrl.core.rollout.backends.vllm.adapters import AdapterSlot
from comlrl.core.rollout.backends.vllm.backend import EngineRequest, EngineSample
from comlrl.core.rollout.backends.vllm.options import VLLMOptions

# Attribute paths from ``LLM`` to the model it runs, newest vLLM first.
_MODEL_PATHS = (
    "llm_engine.model_executor.driver_worker.worker.model_runner.model",
    "llm_engine.model_executor.driver_worker.model_runner.model",
)


def _import_vllm():
    try:
        import vllm
    except ImportError as exc:  # the config check normally catches this first
        raise ImportError(
            "rollout_backend='vllm' needs vLLM: pip install 'comlrl-core[vllm]'"
        ) from exc
    return vllm


# The ranks vLLM's LoRAConfig accepts for max_lora_rank (vllm.config.lora.MaxLoRARanks).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def engine_lora_rank(rank: int) -> int:
    """The smallest rank vLLM accepts as ``max_lora_rank`` that serves adapters of ``rank``."""
    for allowed in LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(
        f"LoRA rank {rank} is above the largest max_lora_rank vLLM serves ({LORA_RANKS[-1]}); "
        "use a smaller peft_config r or rollout_backend='hf'."
    )


def llm_kwargs(
    source: str, *, max_loras: int, max_lora_rank: int | None, options: VLLMOptions, seed: int
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` for one colocated engine (pure: no vLLM import)."""
    kwargs: dict[str, Any] = dict(
        model=source,
        gpu_memory_utilization=options.gpu_memory_utilization,
        enable_sleep_mode=options.enable_sleep_mode,
        dtype=options.dtype,
        seed=seed,
        enforce_eager=options.enforce_eager,
        skip_tokenizer_init=True,  # ids in, ids out
    )
    if options.max_model_len is not None:
        kwargs["max_model_len"] = options.max_model_len
    if max_loras:
        kwargs.update(
            enable_lora=True,
            max_loras=max_loras,
            max_lora_rank=engine_lora_rank(max_lora_rank or 8),
        )
    kwargs.update(options.engine_kwargs)
    return kwargs


class VLLMEngine:
    """One ``vllm.LLM`` serving a base model (with LoRA slots when ``max_loras`` > 0)."""

    def __init__(
        self,
        source: str,
        *,
        max_loras: int,
        max_lora_rank: int | None,
        options: VLLMOptions,
        seed: int,
    ):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        vllm = _import_vllm()
        kwargs = llm_kwargs(
            source, max_loras=max_loras, max_lora_rank=max_lora_rank, options=options, seed=seed
        )
        if "logprobs_mode" not in kwargs and _engine_arg("logprobs_mode"):
            # Log-probs of the distribution actually sampled (after temperature, top-k/p).
            kwargs["logprobs_mode"] = "processed_logprobs"
        self.llm = vllm.LLM(**kwargs)

    def generate(self, requests: Sequence[EngineRequest]) -> list[list[EngineSample]]:
        """See :meth:`comlrl.core.rollout.backends.vllm.backend.Engine.generate`."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.lora.request import LoRARequest

        prompts = [TokensPrompt(prompt_token_ids=r.prompt_ids) for r in requests]
        params = [SamplingParams(**r.sampling) for r in requests]
        loras = [
            None
            if r.adapter is None
            else LoRARequest(r.adapter.name, r.adapter.lora_id, r.adapter.path)
            for r in requests
        ]
        outs = self.llm.generate(
            prompts,
            params,
            use_tqdm=False,
            lora_request=loras if any(x is not None for x in loras) else None,
        )
        return [[_sample(c) for c in out.outputs] for out in outs]

    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """See :meth:`comlrl.core.rollout.backends.vllm.backend.Engine.load_weights`."""
        model = self._model()
        if model is not None:
            model.load_weights(weights)
            return
        apply_model = getattr(self.llm, "apply_model", None)
        if apply_model is None:
            raise RuntimeError(
                "rollout_backend='vllm': cannot reach the engine's model to load trained "
                f"weights (tried {', '.join(_MODEL_PATHS)} and LLM.apply_model); this vLLM "
                "version is not supported for full-weight agents (LoRA agents need no weight "
                "loading)."
            )
        # Newer vLLM: run the model's own load_weights in each worker (in-process here).
        items = list(weights)
        apply_model(lambda m: m.load_weights(items))

    def drop_adapter(self, slot: AdapterSlot) -> None:
        """See :meth:`comlrl.core.rollout.backends.vllm.backend.Engine.drop_adapter`."""
        remove = getattr(self.llm.llm_engine, "remove_lora", None)
        if remove is not None:
            remove(slot.lora_id)

    def sleep(self) -> None:
        """See :meth:`comlrl.core.rollout.backends.vllm.backend.Engine.sleep` (vLLM sleep level 1)."""
        self.llm.sleep(level=1)

    def wake_up(self) -> None:
        """See :meth:`comlrl.core.rollout.backends.vllm.backend.Engine.wake_up`."""
        self.llm.wake_up()

    def _model(self) -> Any:
        for path in _MODEL_PATHS:
            obj: Any = self.llm
            for part in path.split("."):
                obj = getattr(obj, part, None)
                if obj is None:
                    break
            if obj is not None:
                return obj
        return None


def _engine_arg(name: str) -> bool:
    from vllm.engine.arg_utils import EngineArgs

    return name in {f.name for f in dataclasses.fields(EngineArgs)}


def _sample(completion: Any) -> EngineSample:
    ids = [int(t) for t in completion.token_ids]
    lps = None
    if completion.logprobs:
        # One dict per position, keyed by token id; the sampled token is always in it.
        lps = [float(d[t].logprob) for t, d in zip(ids, completion.logprobs)]
    return EngineSample(ids, lps)
