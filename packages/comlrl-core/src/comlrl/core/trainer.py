"""The shared training loop every algorithm family plugs into.

A family subclasses :class:`TrainerBase` and implements ``_train_batch(items)`` (collect rollouts
and update), and optionally ``_end_epoch()`` (drain buffers), ``_family_state_dict()`` /
``_load_family_state_dict()`` (extra resumable state). The base owns epochs, batching of dataset
items, the eval cadence, progress bars, logging, signals and checkpoints.
"""

from __future__ import annotations

import functools
import os
import random
import signal
import threading
import time
import warnings
from collections.abc import Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import numpy as np
import torch

from comlrl.core.devices import AgentWorkers, plan_devices, uses_parallel_workers
from comlrl.core.distributed import (
    DistributedContext,
    IndexedWorkers,
    all_reduce_gradients,
    barrier,
    current_worker,
    init_context,
    item_seed,
    local_context,
    per_rank_config,
    pooled_mean_std,
    reduce_metrics,
    shard_range,
)
from comlrl.core.logging import MetricLogger
from comlrl.core.models import (
    add_special_tokens,
    infer_model_name,
    load_agents,
    resolve_model_sources,
    resolve_tokenizers,
    sync_generation_ids,
    unique_models,
)
from comlrl.core.rewards import RewardCaller
from comlrl.core.rollout.formatters import build_formatters
from comlrl.core.rollout.generation import PromptSamples, SamplingParams, generate_samples
from comlrl.core.rollout.tree import TreeSettings, build_trees
from comlrl.core.timing import DEFAULT_PHASES, PhaseTimer

# torch.manual_seed is process-wide: item-seeded generation in concurrent agent workers takes
# turns, so each item's seed governs exactly its own generate call.
_ITEM_SEED_LOCK = threading.Lock()


def main_process_only(method):
    """Run a saving method on rank 0 only; every rank returns once it is done (a barrier).

    :class:`TrainerBase` applies it to ``save_model`` of every subclass that defines one, so a
    family's own saving code needs no rank checks. Nested calls (a subclass calling
    ``super().save_model``) run plainly inside the outer one.
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if not self.dist.is_distributed or getattr(self, "_saving_on_main", False):
            return method(self, *args, **kwargs)
        result = None
        sharded = getattr(self, "sharded", None)
        # Sharded agents are gathered into full tensors on every rank before rank 0 saves.
        view = sharded.full_view() if sharded is not None else nullcontext()
        try:
            with view:
                if self.dist.is_main:
                    self._saving_on_main = True
                    try:
                        result = method(self, *args, **kwargs)
                    finally:
                        self._saving_on_main = False
        finally:
            barrier(self.dist)
        return result

    wrapper._main_process_only = True
    return wrapper


class TrainingInterrupted(Exception):
    """Raised inside the loop when SIGINT/SIGTERM asked training to stop."""


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


class TrainerBase:
    """Common state and loop. Subclasses set ``algorithm_name`` and ``default_config_cls``."""

    algorithm_name = "Base"
    default_config_cls: type | None = None
    # The timing/<phase> keys of the training records (a family with more phases extends it).
    timing_phases: tuple[str, ...] = DEFAULT_PHASES
    # A single process until _init_common joins the launcher's process group.
    dist: DistributedContext = local_context()
    _rollout_offset: int | None = None  # global index of the first item of the current shard
    _level_keys: list | None = None  # per-node keys of the tree level being generated

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("save_model")
        if own is not None and not getattr(own, "_main_process_only", False):
            cls.save_model = main_process_only(own)

    # ----------------------------------------------------------------- construction helpers
    def _init_common(
        self,
        *,
        args,
        agent_model,
        agents,
        num_agents,
        tokenizer,
        model_config,
        train_dataset,
        eval_dataset,
        reward_func,
        reward_processor,
        formatters,
        external_transition,
        wandb_config,
        eval_logger,
        eval_aggregator,
        load_models: bool = True,
    ) -> None:
        """Validate cheap inputs, then load agents and tokenizers onto their devices."""
        self.timing = PhaseTimer(self.timing_phases)
        self.args = args if args is not None else self.default_config_cls()
        # Multi-process data parallelism (see docs/distributed.md): ``global_args`` is the
        # config as written; ``args`` holds this rank's share of every global batch threshold.
        self.global_args = self.args
        self.dist = init_context(getattr(self.args, "distributed_mode", "auto"))
        if self.dist.is_distributed and not self.supports_multi_process():
            raise ValueError(
                f"{self.algorithm_name} runs its own training loop, which does not shard data or "
                f"average gradients across processes (WORLD_SIZE={self.dist.world_size}); run it "
                "in a single process. See docs/distributed.md."
            )
        self.sharded = None
        if self.dist.sharding == "fsdp":
            reason = self.fsdp_unsupported_reason(self.args)
            if reason is not None:
                raise ValueError(
                    f"{self.algorithm_name} cannot shard its agents with FSDP here: {reason}. "
                    "Use distributed_mode='ddp' (or the DDP accelerate config); see "
                    "docs/distributed.md."
                )
        self.args = per_rank_config(self.args, self.dist)
        self.gradient_sync_hooks: list = []
        self._rollout_offset: int | None = None
        self._level_keys: list | None = None
        self.model_config = dict(model_config or {})
        self.train_dataset = train_dataset
        self.eval_dataset = eval_dataset
        self.external_transition = external_transition
        self.wandb_config = wandb_config
        self.eval_logger = eval_logger
        self.eval_aggregator = eval_aggregator
        self.env_step = 0
        self.sources = resolve_model_sources(agent_model, agents, num_agents)
        self.num_agents = len(self.sources)
        cfg_agents = getattr(self.args, "num_agents", None)
        if agents is not None and agent_model is None and num_agents not in (None, self.num_agents):
            raise ValueError(
                f"num_agents ({num_agents}) does not match len(agents) ({self.num_agents})."
            )
        if cfg_agents is not None and cfg_agents != self.num_agents:
            raise ValueError(
                f"args.num_agents ({cfg_agents}) does not match the number of agents "
                f"({self.num_agents}); set the config's num_agents to {self.num_agents}."
            )
        self.formatters = build_formatters(formatters, self.num_agents)
        if reward_func is None or not callable(reward_func):
            raise ValueError("reward_func must be a callable.")
        self.reward_func = reward_func
        self.reward_processor = reward_processor
        self.reward_caller = RewardCaller(
            reward_func,
            num_agents=self.num_agents,
            reward_processor=reward_processor,
            call_mode=getattr(self.args, "reward_call_mode", "auto"),
        )
        if getattr(self.args, "num_turns", 1) > 1 and external_transition is None:
            raise ValueError(
                f"Multi-turn {self.algorithm_name} requires an external_transition "
                f"(num_turns={self.args.num_turns})."
            )
        if tokenizer is None and not all(isinstance(s, (str, os.PathLike)) for s in self.sources):
            raise ValueError("Tokenizer(s) must be provided when agents are model objects.")
        if isinstance(tokenizer, (list, tuple)) and len(tokenizer) != self.num_agents:
            raise ValueError(
                f"tokenizers length ({len(tokenizer)}) must match agents ({self.num_agents})."
            )
        self.model_name = infer_model_name(self.sources[0])
        self.agent_devices = plan_devices(
            self.args.parallel_training, self.args.agent_devices, self.num_agents
        )
        if (
            self.dist.is_distributed
            and self.args.agent_devices is None
            and torch.cuda.is_available()
        ):
            # Each rank trains on its own GPU unless agent_devices places the agents.
            self.agent_devices = [torch.device("cuda", self.dist.local_rank)] * self.num_agents
        parallel = uses_parallel_workers(self.args.parallel_training, self.agent_devices)
        self._worker_groups: list = []
        if self.dist.is_distributed and parallel and self.num_agents > 1:
            # One process group per agent worker: concurrent agents reduce independently.
            self.workers = IndexedWorkers(self.num_agents, True)
            self._worker_groups = [torch.distributed.new_group() for _ in range(self.num_agents)]
        else:
            self.workers = AgentWorkers(self.num_agents, parallel)
        if not load_models:
            return
        self.agents = load_agents(self.sources, self.model_config)
        self.tokenizers = resolve_tokenizers(tokenizer, self.sources, self.model_config)
        if self.model_config.get("special_tokens"):
            add_special_tokens(self.tokenizers, self.agents, self.model_config["special_tokens"])
        for model, tok, dev in zip(self.agents, self.tokenizers, self.agent_devices):
            model.to(dev)
            sync_generation_ids(model, tok)
        self._shared_agents = len(unique_models(self.agents)) < len(self.agents)
        if self.dist.sharding == "fsdp":
            from comlrl.core.sharding import ShardedAgents

            # Before any optimizer exists: optimizers must hold the sharded parameters.
            self.sharded = ShardedAgents(self.agents, self.dist)

    def fsdp_unsupported_reason(self, args) -> str | None:
        """Why this trainer cannot shard its agents with FSDP2 under ``args`` (None: it can).
        Families whose steps go through :meth:`sync_gradients` support it."""
        if not self.supports_multi_process():
            return "its training loop does not run under several processes"
        if getattr(args, "parallel_training", None) == "mp":
            return "parallel_training='mp' (agent worker threads) is not combined with FSDP"
        return None

    @classmethod
    def supports_multi_process(cls) -> bool:
        """Whether the family trains through the shared loop, which shards global batches across
        ranks (its optimizer steps must call :meth:`sync_gradients`)."""
        return cls.train is TrainerBase.train

    @property
    def is_main_process(self) -> bool:
        """Whether this process logs, evaluates and saves (rank 0, or the only process)."""
        return self.dist.is_main

    def sync_gradients(self, parameters) -> list:
        """Average the gradients of ``parameters`` over ranks (a no-op in one process) and run
        ``gradient_sync_hooks``; returns the parameters as a list.

        Families call it after the backward passes of an optimizer step and before clipping, so
        every rank clips and steps with identical gradients and keeps identical weights. Each
        hook is called as ``hook(trainer, params)`` once the gradients are final (tests use it to
        compare weights across ranks before every step).
        """
        params = list(parameters)
        dist = self.dist
        sharded = getattr(self, "sharded", None)
        replicated = params
        if sharded is not None:
            # FSDP reduce-scatters the sharded agents' gradients; the rest (e.g. critics) are
            # replicated and all-reduced below. The agents' parameters come back sharded.
            roots, replicated = sharded.split(params)
            if roots:
                params = sharded.reduce_gradients(params) + replicated
        if dist.is_distributed:
            all_reduce_gradients(
                replicated, dist, 1.0 / dist.world_size, group=self._collective_group()
            )
        for hook in getattr(self, "gradient_sync_hooks", ()):
            hook(self, params)
        return params

    def pooled_moments(
        self, groups: Sequence[torch.Tensor]
    ) -> list[tuple[float, float, int]] | None:
        """Mean, population std and count of each group of values over every rank's share of a
        buffer (None in a single process: the caller's own statistics are then exact). Every
        rank must call it at the same point with the same number of groups."""
        if not self.dist.is_distributed:
            return None
        return pooled_mean_std(groups, self.dist, group=self._collective_group())

    def _collective_group(self):
        """The process group for a collective issued now: the calling agent worker's own group
        (concurrent agents then never interleave their collectives), else the default group."""
        worker = current_worker()
        return self._worker_groups[worker] if worker is not None and self._worker_groups else None

    @property
    def tokenizer(self):
        """The first agent's tokenizer (compat)."""
        return self.tokenizers[0]

    # --------------------------------------------------------------------- timing
    def timed(self, phase: str) -> AbstractContextManager[None]:
        """Context manager adding the block's wall time to ``timing/<phase>`` of the next
        training record (nested blocks of one phase count once; evaluation never counts)."""
        return self.timing.phase(phase)

    def add_timing(self, phase: str, seconds: float) -> None:
        """Add ``seconds`` to ``timing/<phase>`` of the next training record."""
        self.timing.add(phase, seconds)

    # --------------------------------------------------------------------- generation
    def sampling_params(self, overrides: dict | None = None, *, eval_mode: bool = False):
        """Sampling settings from the config (plus ``train(**kwargs)`` overrides)."""
        a = self.args
        extra = dict(overrides or {})
        return SamplingParams(
            max_new_tokens=a.max_new_tokens,
            temperature=a.temperature,
            top_p=a.top_p,
            top_k=a.top_k,
            do_sample=not (eval_mode and getattr(a, "eval_greedy", False)),
            extra=extra,
        )

    def generate_per_agent(
        self, prompts_per_agent: list[list[str]], num_samples: int, params: SamplingParams
    ) -> list[list[PromptSamples]]:
        """Each agent samples ``num_samples`` completions for each of its prompts, in one
        batched call per agent (concurrently across devices in mp mode). The time and the
        generated tokens count towards ``timing/generate`` and the throughput."""
        budget = getattr(self.args, "generation_batch_size", None)
        keys = self._level_keys

        def run(i: int, prompts: list[str]) -> list[PromptSamples]:
            if keys is not None:
                return self._generate_item_seeded(i, prompts, keys, num_samples, params)
            return generate_samples(
                self.agents[i],
                self.tokenizers[i],
                prompts,
                num_samples,
                params,
                max_sequences_per_call=budget,
            )

        with self.timed("generate"):
            out = self.workers.map(run, prompts_per_agent)
        self.timing.add_tokens(sum(s.num_tokens for agent in out for s in agent))
        return out

    def _generate_item_seeded(
        self,
        agent: int,
        prompts: list[str],
        keys: list[tuple],
        num_samples: int,
        params: SamplingParams,
    ) -> list[PromptSamples]:
        """One generate call per prompt, seeded from (seed, epoch, node key, agent) only, so the
        samples do not depend on batch composition or on the rank that rolls the item out."""
        seed = getattr(self.args, "seed", None) or 0
        epoch = getattr(self, "epoch", 0)
        model = self.agents[agent]
        device = next(model.parameters()).device
        devices = [device] if device.type == "cuda" else []
        out = []
        for prompt, key in zip(prompts, keys):
            with _ITEM_SEED_LOCK, torch.random.fork_rng(devices=devices):
                torch.manual_seed(item_seed(seed, epoch, *key, agent))
                out.extend(
                    generate_samples(model, self.tokenizers[agent], [prompt], num_samples, params)
                )
        return out

    def score(self, agent_completions, *, prompts, batch_items) -> list[float]:
        """Joint rewards for a batch of joint actions (timed as ``timing/reward``)."""
        with self.timed("reward"):
            return self.reward_caller(agent_completions, prompts=prompts, batch_items=batch_items)

    def rollout(
        self,
        items: Sequence[dict],
        num_samples: int,
        params: SamplingParams,
        *,
        joint_mode: str = "aligned",
        early_termination_threshold=None,
        env_step_start: int = 0,
    ):
        """Multi-turn rollout trees for ``items`` (see :mod:`comlrl.core.rollout.tree`)."""
        a = self.args
        settings = TreeSettings(
            num_agents=self.num_agents,
            num_turns=a.num_turns,
            num_samples=num_samples,
            joint_mode=joint_mode,
            early_termination_threshold=early_termination_threshold,
            discount=getattr(a, "discount", 1.0),
            external_prompt_passthrough=getattr(a, "external_prompt_passthrough", False),
        )
        keyed = getattr(a, "item_seeded_sampling", False) and self._rollout_offset is not None

        def generate(prompts, keys=None):
            self._level_keys = keys
            try:
                return self.generate_per_agent(prompts, num_samples, params)
            finally:
                self._level_keys = None

        world = self.dist.world_size if self._rollout_offset is not None else 1
        roots = build_trees(
            items,
            settings,
            self.formatters,
            generate,
            self.score,
            self.external_transition,
            env_step_start=0,
            item_offset=self._rollout_offset or 0,
            keyed=keyed,
        )
        # Ranks advance in lockstep over equal shards, so a node's global env step is its
        # rank-local count times the world size (identical on every rank; world 1: unchanged).
        for root in roots:
            for node in root.walk():
                node.env_step = env_step_start + node.env_step * world
        return roots

    # --------------------------------------------------------------------- data
    def get_train_dataloader(self):
        """The training items in order (the reference never shuffles)."""
        if self.train_dataset is None:
            raise ValueError("Trainer: training requires a train_dataset.")
        return self.train_dataset

    def get_eval_dataloader(self):
        """The eval items, or None."""
        return self.eval_dataset

    def items_per_batch(self) -> int:
        """How many dataset items one rollout batch holds."""
        return 1

    # --------------------------------------------------------------------- training loop
    def _train_batch(self, items: list[dict], generation_kwargs: dict) -> None:
        raise NotImplementedError

    def _end_epoch(self) -> None:
        """Hook: finish an epoch (e.g. drain buffers)."""

    def _run_dir(self) -> str:
        out = getattr(self.args, "output_dir", None)
        if out:
            return str(out)
        if self.wandb_config and self.wandb_config.get("dir"):
            return os.path.join(self.wandb_config["dir"], "comlrl")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return os.path.join("runs", f"{self.algorithm_name.lower()}-{stamp}-{os.getpid()}")

    def run_config(self) -> dict[str, Any]:
        """The run description logged to W&B (the config as written, global batch sizes)."""
        a = getattr(self, "global_args", self.args)
        keys = (
            "num_turns",
            "advantage_mode",
            "advantage_normalization",
            "reference_kl_enabled",
            "reference_kl_coef",
            "reference_devices",
            "agent_learning_rate",
            "num_train_epochs",
            "max_new_tokens",
            "num_generations",
        )
        cfg = {
            "model_name": self.model_name,
            "num_agents": self.num_agents,
            "algorithm": self.algorithm_name,
        }
        cfg.update({k: getattr(a, k) for k in keys if hasattr(a, k)})
        return cfg

    def _ensure_logger(self) -> MetricLogger:
        if getattr(self, "logger", None) is None:
            self.run_dir = self._run_dir()
            self.logger = MetricLogger(
                self.run_dir,
                wandb_config=self.wandb_config,
                run_config=self.run_config(),
                default_name=f"test-{self.algorithm_name.lower()}",
                enabled=self.is_main_process,
            )
        return self.logger

    def log_metrics(
        self, metrics: dict[str, Any], step: int | None = None, *, reduce: bool = True
    ) -> None:
        """Log at ``step`` (default: the current env step).

        In multi-process training every rank must call this at the same points with the same
        keys: the values are averaged over ranks (``reduce=False``: log this rank's values as
        they are, which evaluation on rank 0 does) and only rank 0 writes them.
        """
        if reduce and self.dist.is_distributed:
            metrics = self._reduce_metrics(metrics)
        self._ensure_logger().log(metrics, self.env_step if step is None else step)

    def _reduce_metrics(self, metrics: dict[str, Any]) -> dict[str, float]:
        import zlib

        keys = sorted(metrics)
        # A checksum of the key set rides along, so ranks logging different keys fail loudly
        # instead of averaging unrelated numbers.
        tag = float(zlib.crc32("\n".join(keys).encode()))
        reduced = reduce_metrics({**metrics, "\x00keys": tag}, self.dist)
        if reduced.pop("\x00keys") != tag:
            raise RuntimeError(
                f"Ranks logged different metric keys at env step {self.env_step} (rank "
                f"{self.dist.rank}: {keys}); every rank must log the same metrics."
            )
        return reduced

    def _eval_due(self, start: int, count: int) -> bool:
        every = getattr(self.args, "eval_interval", 0)
        if not every or self.eval_dataset is None or getattr(self.args, "eval_num_samples", 1) == 0:
            return False
        return any(i % every == 0 for i in range(start, start + count))

    def _progress(self, total: int, epoch: int):
        from tqdm.auto import tqdm

        return tqdm(
            total=total,
            desc=f"{self.algorithm_name} epoch {epoch + 1}/{self.args.num_train_epochs}",
            unit="item",
            disable=not getattr(self, "verbose", True) or not self.is_main_process,
            dynamic_ncols=True,
        )

    @contextmanager
    def _stop_on_signals(self):
        """Turn SIGINT/SIGTERM into a clean stop at the next batch boundary."""
        self._stop_requested = False
        previous = {}

        def handler(signum, frame):
            self._stop_requested = True

        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread: signals cannot be installed here
            previous = {}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    def train(
        self,
        resume_from_checkpoint: str | None = None,
        checkpoint_dir: str | None = None,
        checkpoint_interval: int = 1,
        checkpoint_total_limit: int | None = None,
        checkpoint_every_batches: int | None = None,
        **generation_kwargs,
    ) -> None:
        """Train for ``args.num_train_epochs`` epochs.

        Checkpoints (see docs/checkpointing.md): with ``checkpoint_dir`` a checkpoint is written
        after every ``checkpoint_interval``-th epoch and after the last one, and, when
        ``checkpoint_every_batches`` is set, inside epochs after every n-th rollout batch.
        ``checkpoint_total_limit`` keeps only the newest n. ``resume_from_checkpoint`` (a
        checkpoint, its directory's ``latest``, a run dir, or ``"latest"`` of ``checkpoint_dir``)
        continues a run exactly where that checkpoint left it, mid-epoch included. SIGINT or
        SIGTERM stop training after the current batch, write a checkpoint, and return with
        ``self.interrupted`` set.

        Extra keyword arguments go to ``model.generate`` during training rollouts.
        """
        from comlrl.core.checkpoint.rng import preserved_rng
        from comlrl.core.checkpoint.session import CheckpointSession

        session = CheckpointSession(
            self,
            resume_from_checkpoint,
            checkpoint_dir,
            checkpoint_interval,
            checkpoint_total_limit,
            checkpoint_every_batches=checkpoint_every_batches,
        )
        data = self.get_train_dataloader()
        logger = self._ensure_logger()
        logger.reopen()
        self.cursor = (0, 0)
        self.global_batch = 0
        self.interrupted = False
        self._training_complete = False
        self.last_checkpoint = None
        start_epoch, start_pos = session.restore()
        if session.fresh and getattr(self.args, "seed", None) is not None:
            seed_everything(self.args.seed + self.dist.rank)
        with preserved_rng():  # opening W&B must not change the training trajectory
            logger.start_wandb(resume_id=session.wandb_run_id)
        world = self.dist.world_size
        per_batch = self.items_per_batch() * world
        total = len(data) - len(data) % world
        if total < len(data):
            warnings.warn(
                f"{len(data) % world} of the {len(data)} training items are dropped from every "
                f"epoch so that {world} processes get equal shards.",
                stacklevel=2,
            )
        self._train_started = time.perf_counter()
        sharded = getattr(self, "sharded", None)
        try:
            with self._stop_on_signals(), sharded.training() if sharded else nullcontext():
                for epoch in range(start_epoch, self.args.num_train_epochs):
                    self.epoch = epoch
                    pos = start_pos if epoch == start_epoch else 0
                    self.cursor = (epoch, pos)
                    bar = self._progress(total, epoch)
                    bar.update(pos)
                    while pos < total:
                        count = min(per_batch, total - pos)
                        if self._eval_due(pos, count) and self.is_main_process:
                            self.evaluate()
                        begin, end = shard_range(pos, count, self.dist)
                        items = [data[i] for i in range(begin, end)]
                        self._rollout_offset = begin
                        try:
                            self._train_batch(items, generation_kwargs)
                        finally:
                            self._rollout_offset = None
                        pos += count
                        self.global_batch += 1
                        self.cursor = (epoch, pos)
                        bar.update(count)
                        self._update_progress(bar)
                        if self._stop_requested:
                            bar.close()
                            self._stop_after_signal(session)
                            return
                        session.after_batch()
                    bar.close()
                    self._end_epoch()
                    self.cursor = (epoch + 1, 0)
                    session.after_epoch(last=epoch + 1 == self.args.num_train_epochs)
        except BaseException:
            logger.close(finish_wandb=False)
            raise
        self.last_checkpoint = session.last_path
        self._training_complete = True
        logger.close(finish_wandb=False)
        self.logger_closed = True
        barrier(self.dist)  # every rank returns once rank 0's last checkpoint is written

    def _stop_after_signal(self, session) -> None:
        """Checkpoint (when a checkpoint_dir is set), close the logs, and report how to resume."""
        import logging

        path = session.save_now(reason="signal")
        self.interrupted = True
        self.last_checkpoint = path
        self._ensure_logger().close(finish_wandb=True)
        if path is not None:
            logging.getLogger(__name__).warning(
                "Training stopped by a signal at epoch %d, item %d; checkpoint written to %s. "
                "Resume with train(resume_from_checkpoint=%r, ...).",
                self.cursor[0] + 1,
                self.cursor[1],
                path,
                path,
            )

    def _update_progress(self, bar) -> None:
        last = getattr(self, "_last_reward_mean", None)
        if last is not None:
            bar.set_postfix(reward=f"{last:.3f}", env_step=self.env_step, refresh=False)

    # --------------------------------------------------------------------- evaluation
    def evaluate(self, num_eval_samples: int | None = None) -> dict[str, float]:
        """Roll out one joint sample per eval item and turn; log and return turn metrics.

        Runs under a forked RNG, so evaluating never changes the training trajectory, and
        outside the training timings (:attr:`timing`), which describe training work only.
        """
        with self.timing.excluded():
            if self.eval_dataset is None:
                return {}
            limit = self.args.eval_num_samples if num_eval_samples is None else num_eval_samples
            if limit <= 0:
                return {}
            items = [self.eval_dataset[i] for i in range(min(limit, len(self.eval_dataset)))]
            devices = [d for d in {str(d) for d in self.agent_devices} if d.startswith("cuda")]
            with torch.random.fork_rng(devices=devices), torch.no_grad():
                state = random.getstate()
                np_state = np.random.get_state()
                try:
                    metrics = self._evaluate_items(items)
                finally:
                    random.setstate(state)
                    np.random.set_state(np_state)
            self.log_metrics(metrics, reduce=False)
            return metrics

    def _evaluate_items(self, items: list[dict]) -> dict[str, float]:
        params = self.sampling_params(eval_mode=True)
        batch = max(1, getattr(self.args, "eval_batch_size", 1))
        turns = self.args.num_turns
        rewards = [[None] * turns for _ in items]
        completions = [[[] for _ in items] for _ in range(self.num_agents)]
        for start in range(0, len(items), batch):
            chunk = items[start : start + batch]
            roots = self.rollout(chunk, 1, params, env_step_start=0)
            for j, root in enumerate(roots):
                node = root
                while node is not None:
                    rewards[start + j][node.turn] = node.rewards[0]
                    for i in range(self.num_agents):
                        completions[i][start + j].append(node.samples[i].texts[0])
                    node = node.children[0] if node.children else None
        metrics: dict[str, float] = {}
        for t in range(turns):
            vals = [r[t] for r in rewards if r[t] is not None]
            if not vals:
                continue
            metrics[f"eval/turn_{t + 1}/reward_mean"] = float(np.mean(vals))
            rets = [sum(x for x in r[t:] if x is not None) for r in rewards if r[t] is not None]
            metrics[f"eval/turn_{t + 1}/expected_return"] = float(np.mean(rets))
        if self.eval_logger is not None and self.eval_aggregator is not None:
            detailed = self.eval_logger(
                agent_completions_turns=completions,
                batch_items=items,
                prompts=[it.get("prompt", "") for it in items],
            )
            agg = self.eval_aggregator(detailed, num_turns=turns) or {}
            extra = {f"eval/{k}": float(v) for k, v in agg.items()}
            extra.update(metrics)
            metrics = extra
        return metrics

    # --------------------------------------------------------------------- saving
    @main_process_only
    def save_model(self, output_dir: str) -> None:
        """Write ``output_dir/agent_{i}/`` (model and tokenizer) for every agent (rank 0 writes;
        in multi-process training every rank calls this and returns once the files exist)."""
        for i, (model, tok) in enumerate(zip(self.agents, self.tokenizers)):
            path = os.path.join(output_dir, f"agent_{i}")
            model.save_pretrained(path)
            tok.save_pretrained(path)
        logger = getattr(self, "logger", None)
        if logger is not None and logger.wandb is not None:
            logger.log({"final_model_saved": str(output_dir)}, self.env_step)

    # --------------------------------------------------------------------- resumable state
    def optimizers_list(self) -> list:
        """Every optimizer the checkpoint must hold, in a stable order."""
        return list(getattr(self, "optimizers", []))

    def trainable_models(self) -> dict[str, Any]:
        """Named models whose weights a checkpoint holds."""
        return {f"agent_{i}": m for i, m in enumerate(self.agents)}

    def _family_state_dict(self) -> dict[str, Any]:
        return {}

    def _load_family_state_dict(self, state: dict[str, Any]) -> None:
        return None

    def schedulers_list(self) -> list:
        """Every LR scheduler the checkpoint must hold, in a stable order."""
        return list(getattr(self, "schedulers", []))

    def checkpoint_tokenizers(self) -> dict[str, Any]:
        """The tokenizer saved next to each named model of :meth:`trainable_models`."""
        return {f"agent_{i}": tok for i, tok in enumerate(getattr(self, "tokenizers", []))}

    def checkpoint_callbacks(self) -> dict[str, Any]:
        """User objects whose own ``state_dict``/``load_state_dict`` a checkpoint carries
        (e.g. a reward function with a running baseline). Their state must be plain data."""
        candidates = {
            "train_dataset": getattr(self, "train_dataset", None),
            "reward_func": getattr(self, "reward_func", None),
            "reward_processor": getattr(self, "reward_processor", None),
            "external_transition": getattr(self, "external_transition", None),
            "eval_logger": getattr(self, "eval_logger", None),
            "eval_aggregator": getattr(self, "eval_aggregator", None),
        }
        return {
            name: obj
            for name, obj in candidates.items()
            if callable(getattr(obj, "state_dict", None))
            and callable(getattr(obj, "load_state_dict", None))
            and not isinstance(obj, torch.nn.Module)
        }

    def checkpoint_loop_limits(self) -> tuple[int, int | None]:
        """(epochs, items per epoch) of the loop, for checkpoint cursor checks and for telling a
        mid-epoch save from an epoch-end one (None: not known yet)."""
        return self.args.num_train_epochs, len(self.get_train_dataloader())

    def _loop_state_dict(self) -> dict[str, Any]:
        """The shared loop's position: data cursor, batches done, and the env step counter."""
        return {
            "cursor": list(self.cursor),
            "global_batch": int(self.global_batch),
            "env_step": int(self.env_step),
        }

    def _load_loop_state_dict(self, state: dict[str, Any]) -> None:
        self.cursor = (int(state["cursor"][0]), int(state["cursor"][1]))
        self.global_batch = int(state["global_batch"])
        self.env_step = int(state["env_step"])
