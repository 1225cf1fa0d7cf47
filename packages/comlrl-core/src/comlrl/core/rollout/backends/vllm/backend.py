"""The vLLM backend's logic: engines per base model, requests, weight and adapter refreshes.

Engine plan (:func:`plan_engines`): agents that are PEFT models of one base share one engine,
each served through its own LoRA request (:mod:`.adapters`); a full-weight agent gets an engine
of its own (agents that are one shared model object share it). After an agent's optimizer
step, its fresh adapter or weights reach the engine before its next rollout (:mod:`.weights`).

Everything here drives an :class:`Engine`, so it runs and is tested without vLLM: the real
engine is :class:`comlrl.core.rollout.backends.vllm.engine.VLLMEngine`; the tests use an in-process fake
(tests/core/rollout/fake_engine.py).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

from comlrl.core.rollout.backends.protocol import BackendInputs, SampledIds, check_seeds
from comlrl.core.rollout.backends.text import TextSampling
from comlrl.core.rollout.backends.vllm.adapters import AdapterBook, AdapterSlot
from comlrl.core.rollout.backends.vllm.options import VLLMOptions, vllm_options
from comlrl.core.rollout.backends.vllm.sampling import sampling_kwargs
from comlrl.core.rollout.backends.vllm.weights import WeightSync
from comlrl.core.rollout.generation import SamplingParams, eos_ids_of

if TYPE_CHECKING:
    pass

DIAGNOSTIC_KEY = "rollout/logprob_abs_diff"


@dataclass
class EngineRequest:
    """One prompt's request: its token ids, ``vllm.SamplingParams`` keyword arguments, and
    the adapter slot that serves it (None: the engine's own weights)."""

    prompt_ids: list[int]
    sampling: dict[str, Any]
    adapter: AdapterSlot | None = None


@dataclass
class EngineSample:
    """One sampled completion: token ids and each one's sampler log-prob (None: not given)."""

    token_ids: list[int]
    logprobs: list[float] | None = None


class Engine(Protocol):
    """What the backend needs of an inference engine."""

    def generate(self, requests: Sequence[EngineRequest]) -> list[list[EngineSample]]:
        """Per request, its ``sampling["n"]`` samples."""
        ...

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Replace the engine's weights with these (Hugging Face parameter names)."""
        ...

    def drop_adapter(self, slot: AdapterSlot) -> None:
        """Forget a replaced adapter."""
        ...

    def sleep(self) -> None:
        """Free the engine's GPU memory until :meth:`wake_up`."""
        ...

    def wake_up(self) -> None:
        """Take the GPU memory back after :meth:`sleep`."""
        ...


# factory(source, *, max_loras, max_lora_rank, options, seed) -> Engine; max_loras=0: no LoRA
EngineFactory = Callable[..., Engine]


@dataclass
class EnginePlan:
    """Which agents one engine serves, and how."""

    agents: list[int]
    uses_adapters: bool


def is_peft_model(model: Any) -> bool:
    """Whether ``model`` is a PEFT model (its adapter, not its weights, trains)."""
    return hasattr(model, "peft_config") and hasattr(model, "base_model")


def plan_engines(models: Sequence[Any]) -> list[EnginePlan]:
    """One engine per base model of the PEFT agents (by ``name_or_path``), one per distinct
    full-weight model object, in agent order."""
    plans: dict[tuple, EnginePlan] = {}
    for i, model in enumerate(models):
        key: tuple[str, str | int]
        if is_peft_model(model):
            key = ("lora", base_source(model))
        else:
            key = ("full", id(model))
        plans.setdefault(key, EnginePlan([], key[0] == "lora")).agents.append(i)
    return list(plans.values())


def base_source(model: Any) -> str:
    """The hub id or folder a PEFT agent's base was loaded from (what its engine loads)."""
    source = getattr(model.get_base_model().config, "_name_or_path", "") or ""
    if not source:
        raise ValueError(
            "rollout_backend='vllm' serves a PEFT agent through its base model's hub id or "
            "folder, but this agent's base has none (config._name_or_path is empty); load the "
            "agent from a hub id or folder, or use rollout_backend='hf'."
        )
    return source


class VLLMBackend(TextSampling):
    """Rollouts from vLLM engines (see the module docstring), through the same seam as
    :class:`~comlrl.core.rollout.backends.hf.HFBackend`: ids in, ids out, each completion cut after
    its first EOS, with the sampler's per-token log-probs.

    ``engines`` pairs each :class:`EnginePlan` with its engine; ``models`` are the trained
    agents (adapters are saved from them, weights read from them, and the log-prob diagnostic
    scores with them).
    """

    def __init__(
        self,
        models: Sequence[Any],
        tokenizers: Sequence[Any],
        engines: Sequence[tuple[EnginePlan, Engine]],
        options: VLLMOptions,
        adapter_root: str,
    ):
        self.models, self.tokenizers, self.options = list(models), tokenizers, options
        self._engine: dict[int, Engine] = {}
        self._plan: dict[int, EnginePlan] = {}
        self._books: dict[int, AdapterBook] = {}
        for plan, engine in engines:
            book = AdapterBook(plan.agents, adapter_root) if plan.uses_adapters else None
            for a in plan.agents:
                self._engine[a], self._plan[a] = engine, plan
                if book is not None:
                    self._books[a] = book
        missing = [a for a in range(len(self.models)) if a not in self._engine]
        if missing:
            raise ValueError(f"agents {missing} have no engine in the plan.")
        agents = list(range(len(self.models)))
        self.sync = WeightSync(agents, options.weight_sync_interval)
        # An adapter agent's first rollout needs its adapter saved: due from the start.
        for a in self._books:
            for _ in range(options.weight_sync_interval):
                self.sync.stepped(a)
        self._asleep: set[int] = set()
        self._lock = threading.Lock()
        self._calls = 0
        self._diff_sum, self._diff_tokens = 0.0, 0

    # ------------------------------------------------------------------ the seam
    def generate_ids(
        self,
        agent: int,
        prompt_ids: Sequence[Sequence[int]],
        n: int,
        params: SamplingParams,
        seeds: Sequence[int] | None = None,
    ) -> list[SampledIds]:
        """See :meth:`~comlrl.core.rollout.backends.protocol.RolloutBackend.generate_ids`. Calls take
        turns (``parallel_training='mp'`` runs agents in threads; an engine is not
        thread-safe, and agents of one base share theirs)."""
        with self._lock:
            return self._generate_ids(agent, prompt_ids, n, params, seeds)

    def _generate_ids(self, agent, prompt_ids, n, params, seeds) -> list[SampledIds]:
        prompt_ids = [list(map(int, p)) for p in prompt_ids]
        check_seeds(seeds, prompt_ids)
        if not prompt_ids:
            return []
        engine = self._engine[agent]
        self._wake(engine)
        self._refresh(agent)
        eos = eos_ids_of(self.tokenizers[agent], self.models[agent])
        adapter = self._books[agent].current(agent) if agent in self._books else None
        requests = [
            EngineRequest(
                p,
                sampling_kwargs(
                    params, n=n, seed=None if seeds is None else int(seeds[j]), eos_ids=eos
                ),
                adapter,
            )
            for j, p in enumerate(prompt_ids)
        ]
        outs = engine.generate(requests)
        if self.options.enable_sleep_mode:
            self._sleep(engine)
        if len(outs) != len(requests) or any(len(o) != n for o in outs):
            raise RuntimeError(
                f"the vLLM engine answered {[len(o) for o in outs]} samples for "
                f"{len(requests)} prompts × n={n}."
            )
        limit = requests[0].sampling["max_tokens"]
        # Each row cut after its first EOS, as the HF backend does.
        records = [SampledIds(p, *_cut_rows(o, eos, limit)) for p, o in zip(prompt_ids, outs)]
        self._calls += 1
        every = self.options.logprob_diagnostic_interval
        if every and params.do_sample and self._calls % every == 0:
            self._diagnose(agent, records, float(requests[0].sampling["temperature"]))
        return records

    def on_weights_updated(self, agent: int, model: torch.nn.Module) -> None:
        """Count ``agent``'s step; its engine gets the new weights before its next rollout
        once ``weight_sync_interval`` steps have accumulated."""
        with self._lock:
            self.models[agent] = model
            # Agents that are this same model object changed too (one engine serves them).
            for other in self._plan[agent].agents:
                if other == agent or self.models[other] is model:
                    self.sync.stepped(other)

    def drain_metrics(self) -> dict[str, float]:
        """``rollout/logprob_abs_diff`` since the previous call (empty when nothing was
        measured); the trainer adds it to its next training record."""
        if not self._diff_tokens:
            return {}
        out = {DIAGNOSTIC_KEY: self._diff_sum / self._diff_tokens}
        self._diff_sum, self._diff_tokens = 0.0, 0
        return out

    # ------------------------------------------------------------------ refreshes
    def _refresh(self, agent: int) -> None:
        if not self.sync.due(agent):
            return
        engine, model = self._engine[agent], self.models[agent]
        if agent in self._books:
            book = self._books[agent]
            slot, old = book.renew(agent)
            # A PEFT model saves its adapter only (weights + adapter_config.json).
            model.save_pretrained(slot.path)
            if old is not None:
                engine.drop_adapter(old)
                book.discard(old)
            self.sync.pushed(agent)
            return
        with torch.no_grad():
            engine.load_weights(
                (name, t.detach()) for name, t in _unwrap(model).state_dict().items()
            )
        # Agents that are this same model object now see the new weights too.
        for other in self._plan[agent].agents:
            if self.models[other] is model:
                self.sync.pushed(other)

    def _wake(self, engine: Engine) -> None:
        if id(engine) in self._asleep:
            engine.wake_up()
            self._asleep.discard(id(engine))

    def _sleep(self, engine: Engine) -> None:
        engine.sleep()
        self._asleep.add(id(engine))

    # ------------------------------------------------------------------ diagnostic
    def _diagnose(self, agent: int, records: list[SampledIds], temperature: float) -> None:
        """Mean |sampler - trainer| token log-prob over this rollout's tokens."""
        from comlrl.core.logprobs.engine import token_logprobs

        rows = [
            (r.prompt_ids, c, lp)
            for r in records
            if r.logprobs
            for c, lp in zip(r.completion_ids, r.logprobs)
            if c
        ]
        if not rows:
            return
        model = self.models[agent]
        pad = self.tokenizers[agent].pad_token_id
        was_training = model.training
        model.eval()
        try:
            scored = token_logprobs(
                model,
                [p for p, _, _ in rows],
                [c for _, c, _ in rows],
                pad_id=pad if pad is not None else 0,
                temperature=temperature,
            )
        finally:
            model.train(was_training)
        values, mask = scored.values.float().cpu(), scored.mask.cpu()
        for j, (_, c, lp) in enumerate(rows):
            ours = values[j][mask[j].bool()][: len(c)]
            theirs = torch.tensor(lp[: len(ours)], dtype=torch.float32)
            self._diff_sum += float((ours - theirs).abs().sum())
            self._diff_tokens += len(theirs)


def _unwrap(model: Any) -> Any:
    # torch.compile keeps the original under _orig_mod, whose names vLLM knows.
    return getattr(model, "_orig_mod", model)


def _cut_rows(
    samples: Sequence[EngineSample], eos: set[int], limit: int
) -> tuple[list[list[int]], list[list[float]] | None]:
    ids_out, lps_out, have = [], [], True
    for s in samples:
        ids = [int(t) for t in s.token_ids][:limit]
        for k, t in enumerate(ids):
            if t in eos:
                ids = ids[: k + 1]
                break
        ids_out.append(ids)
        if s.logprobs is None:
            have = False
        else:
            lps_out.append([float(x) for x in s.logprobs[: len(ids)]])
    return ids_out, (lps_out if have else None)


def lora_rank(model: Any) -> int:
    """The largest LoRA rank among a PEFT model's adapters (what its engine must serve)."""
    ranks = [int(getattr(c, "r", 0) or 0) for c in model.peft_config.values()]
    return max(ranks + [1])


def save_for_engine(model: Any, tokenizer: Any, root: str) -> str:
    """Save a full-weight agent as it is now (weights + config + tokenizer) for its engine
    to load, so the engine starts from the trainer's weights (also in-memory models)."""
    path = tempfile.mkdtemp(prefix="engine-", dir=root)
    _unwrap(model).save_pretrained(path, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    return path


def build_vllm_backend(
    inputs: BackendInputs, engine_factory: EngineFactory | None = None
) -> VLLMBackend:
    """The ``vllm`` backend for loaded agents (the registry's factory).

    ``engine_factory`` builds each engine (default: :class:`~.engine.VLLMEngine`, which imports
    vLLM); the tests pass an in-process fake."""
    options = vllm_options(getattr(inputs.args, "rollout_backend_options", None))
    if inputs.fsdp:
        raise ValueError(
            "rollout_backend='vllm' cannot serve FSDP-sharded agents (each engine needs the "
            "whole model); use distributed_mode='ddp' or rollout_backend='hf'."
        )
    if engine_factory is None:
        from comlrl.core.rollout.backends.vllm.engine import VLLMEngine

        engine_factory = VLLMEngine
    root = tempfile.mkdtemp(prefix="comlrl-vllm-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    seed = inputs.args.seed or 0
    engines = []
    for plan in plan_engines(inputs.agents):
        first = inputs.agents[plan.agents[0]]
        rank = None
        if plan.uses_adapters:
            source = base_source(first)
            rank = options.max_lora_rank or lora_rank(first)
        else:
            source = save_for_engine(first, inputs.tokenizers[plan.agents[0]], root)
        engine = engine_factory(
            source,
            max_loras=len(plan.agents) if plan.uses_adapters else 0,
            max_lora_rank=rank,
            options=options,
            seed=seed,
        )
        engines.append((plan, engine))
    return VLLMBackend(inputs.agents, inputs.tokenizers, engines, options, root)
