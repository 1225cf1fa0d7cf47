"""The trainer base every family builds on: inputs and wiring, and the family contract.

A family subclasses :class:`TrainerBase`, builds its own parts in ``setup`` (after
``super().setup(inputs)``) and implements the contract that :mod:`comlrl.core.loop` drives:
``collect(unit)`` and ``update(batch)``, optionally ``prepare(stage)``, ``end_stage(stage)``
and ``state_dict``/``load_state_dict``. The base owns everything else: models and devices,
the rollout backend, rewards, buffers, logging, evaluation and checkpoints.
"""

from __future__ import annotations

import os
import random
from contextlib import AbstractContextManager
from typing import Any

from comlrl.core import evaluation, loop, step_cadence
from comlrl.core.buffer import RolloutBuffer
from comlrl.core.compat_notices import note_wandb_needs_report_to
from comlrl.core.distributed import (
    DistributedContext,
    init_context,
    local_context,
)
from comlrl.core.gradients import GradientSync
from comlrl.core.input_checks import check_construction, check_generation_kwargs
from comlrl.core.inputs import TrainerInputs
from comlrl.core.logging.sink import require_sink_packages
from comlrl.core.loop import seed_everything  # noqa: F401  (re-exported for families)
from comlrl.core.model_setup import prepare_agents
from comlrl.core.models import place_agents, shares_parameters
from comlrl.core.placement import plan_workers, resolve_agents
from comlrl.core.quiet import quietly
from comlrl.core.ranks import per_rank_config
from comlrl.core.reporting import Reporting
from comlrl.core.resumable import Resumable
from comlrl.core.rewards import RewardCaller
from comlrl.core.rollout.backends import build_rollout_backend
from comlrl.core.rollout.formatters import build_formatters, template_formatters
from comlrl.core.rollout.steps import RolloutSteps
from comlrl.core.saving import main_process_only
from comlrl.core.schedule import stage_count
from comlrl.core.timing import DEFAULT_PHASES, PhaseTimer


class TrainerBase(RolloutSteps, Reporting, Resumable, GradientSync):
    """Inputs, wiring and defaults of the family contract. Subclasses set ``algorithm_name``
    and ``default_config_cls``."""

    algorithm_name = "Base"
    default_config_cls: type | None = None
    inputs_cls: type = TrainerInputs
    # The timing/<phase> keys of the training records (a family with more phases extends it).
    timing_phases: tuple[str, ...] = DEFAULT_PHASES
    # The name under which the progress bar shows ``_last_reward_mean``.
    progress_metric = "reward"
    # A single process until setup joins the launcher's process group.
    dist: DistributedContext = local_context()
    sharded = None
    rollout_buffer: RolloutBuffer | None = None
    skipped_nonfinite = 0
    # Keyword arguments of ``train()`` for the model's ``generate`` (set by ``train``).
    generation_kwargs: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("save_model")
        if own is not None and not getattr(own, "_main_process_only", False):
            cls.save_model = main_process_only(quietly(own))

    @classmethod
    def from_inputs(cls, inputs: TrainerInputs):
        """Build the trainer from an inputs object (what the compat constructors do)."""
        trainer = cls.__new__(cls)
        trainer.setup(inputs)
        return trainer

    # ----------------------------------------------------------------- wiring
    def setup(self, inputs: TrainerInputs, *, load_models: bool = True) -> None:
        """Validate cheap inputs, then load agents and tokenizers onto their devices."""
        self.inputs = inputs
        self.timing = PhaseTimer(self.timing_phases)
        self.args = inputs.args if inputs.args is not None else self.default_config_cls()
        # Multi-process data parallelism (see docs/distributed.md): ``global_args`` is the
        # config as written; ``args`` holds this rank's share of every global batch threshold.
        self.global_args = self.args
        self.dist = init_context(self.args.distributed_mode)
        if self.dist.is_distributed and not self.supports_multi_process():
            raise ValueError(
                f"{self.algorithm_name} runs its own training loop, which does not shard data or "
                f"average gradients across processes (WORLD_SIZE={self.dist.world_size}); run it "
                "in a single process. See docs/distributed.md."
            )
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
        self.model_config = dict(inputs.model_config or {})
        for name in ("train_dataset", "eval_dataset", "external_transition", "wandb_config"):
            setattr(self, name, getattr(inputs, name))
        require_sink_packages(self.args.report_to)
        note_wandb_needs_report_to(inputs.wandb_config, self.args.report_to)
        self.eval_logger, self.eval_aggregator = inputs.eval_logger, inputs.eval_aggregator
        self.dataset_type = inputs.dataset_type
        sections = (inputs.wandb_config or {}).get("config_sections") or {}
        self.verbose = bool((sections.get("output") or {}).get("verbose", True))
        self.env_step = 0
        check_construction(self, inputs.train_dataset, inputs.eval_dataset, inputs.formatters)
        self.sources, self.model_name = resolve_agents(inputs, self.args)
        self.num_agents = len(self.sources)
        self.formatters = build_formatters(inputs.formatters, self.num_agents)
        if inputs.reward_func is None or not callable(inputs.reward_func):
            raise ValueError("reward_func must be a callable.")
        self.reward_func, self.reward_processor = inputs.reward_func, inputs.reward_processor
        self.reward_caller = RewardCaller(
            inputs.reward_func,
            num_agents=self.num_agents,
            reward_processor=inputs.reward_processor,
            call_mode=self.args.reward_call_mode,
        )
        if self.args.num_turns > 1 and inputs.external_transition is None:
            raise ValueError(
                f"Multi-turn {self.algorithm_name} requires an external_transition "
                f"(num_turns={self.args.num_turns})."
            )
        self.agent_devices, self.workers, self._worker_groups = plan_workers(
            self.args, self.dist, self.num_agents
        )
        if not load_models:
            return
        self.agents, self.tokenizers = place_agents(
            self.sources,
            inputs.tokenizer,
            self.model_config,
            self.agent_devices,
            share_named=self.args.peft_config is not None or shares_parameters(self.model_config),
        )
        self.agents = prepare_agents(self.agents, self.args)
        self.formatters = template_formatters(self.formatters, self.tokenizers, self.args)
        self._shared_agents = len({id(m) for m in self.agents}) < len(self.agents)
        self.rollout_backend = build_rollout_backend(self)
        if self.dist.sharding == "fsdp":
            from comlrl.core.sharding import ShardedAgents

            # Before any optimizer exists: optimizers must hold the sharded parameters.
            self.sharded = ShardedAgents(self.agents, self.dist)

    def use_buffer(self, capacity: int, sample_cls: Any, joint_sample_cls: Any = None) -> None:
        """Give the family a rollout buffer of ``capacity`` samples per agent, whose samples
        checkpoint through ``sample_cls.to_state``/``from_state``, and its shuffling RNG."""
        self.rollout_buffer = RolloutBuffer(self.num_agents, capacity)
        self.sample_cls, self.joint_sample_cls = sample_cls, joint_sample_cls
        self.shuffle_rng = random.Random(self.args.seed if self.args.seed is not None else 0)

    @classmethod
    def supports_multi_process(cls) -> bool:
        """Whether the family trains through the shared loop, which shards global batches
        across ranks (a subclass that replaces ``train`` does not)."""
        return cls.train is TrainerBase.train

    def fsdp_unsupported_reason(self, args) -> str | None:
        """Why this trainer cannot shard its agents with FSDP2 under ``args`` (None: it can)."""
        if not self.supports_multi_process():
            return "its training loop does not run under several processes"
        if args.parallel_training == "mp":
            return "parallel_training='mp' (agent worker threads) is not combined with FSDP"
        return None

    @property
    def is_main_process(self) -> bool:
        """Whether this process logs, evaluates and saves (rank 0, or the only process)."""
        return self.dist.is_main

    @property
    def rollout_buffers(self) -> list[list]:
        """Each agent's buffered samples awaiting an update."""
        return self.rollout_buffer.samples

    @property
    def tokenizer(self):
        """The first agent's tokenizer (compat)."""
        return self.tokenizers[0]

    def timed(self, phase: str) -> AbstractContextManager[None]:
        """Context manager adding the block's wall time to ``timing/<phase>`` of the next
        training record (nested blocks of one phase count once; evaluation never counts)."""
        return self.timing.phase(phase)

    def add_timing(self, phase: str, seconds: float) -> None:
        """Add ``seconds`` to ``timing/<phase>`` of the next training record."""
        self.timing.add(phase, seconds)

    # ----------------------------------------------------------------- the family contract
    @property
    def _training_complete(self) -> bool:
        """The older private name of ``training_complete`` (the loop sets the public one)."""
        return self.training_complete

    def num_stages(self) -> int:
        """How many stages the run has (epochs by default)."""
        return stage_count(self.args)

    def prepare(self, stage: int):
        """The units of ``stage`` (None: global batches of ``items_per_batch()`` items)."""
        return None

    def items_per_batch(self) -> int:
        """How many dataset items one rollout batch holds per rank."""
        return 1

    def collect(self, unit):
        """Roll out ``unit`` and return its experience (a :class:`~comlrl.core.buffer.Batch`)."""
        raise NotImplementedError

    def update(self, batch) -> dict[str, float] | None:
        """Optimizer steps on a full buffer (or a collected batch); returns metrics to log."""
        raise NotImplementedError

    def run_unit(self, unit) -> None:
        """Collect, buffer and update one unit (see :func:`comlrl.core.loop.run_unit`)."""
        loop.run_unit(self, unit)

    def end_stage(self, stage: int) -> None:
        """Hook: end-of-stage work once the buffer's remainder has been used."""

    def evaluation_due(self, unit) -> bool:
        """Whether the loop evaluates before ``unit``: by ``eval_steps`` when it is set (the
        step cadence of :mod:`comlrl.core.step_cadence`), otherwise by :meth:`eval_due`."""
        every = self.args.eval_steps
        if every is None:
            return self.eval_due(unit)
        return self.can_evaluate() and step_cadence.due(self, "eval", every)

    def can_evaluate(self) -> bool:
        """Whether there is anything to evaluate: an eval set and ``eval_num_samples`` > 0."""
        return self.eval_dataset is not None and self.args.eval_num_samples > 0

    def eval_due(self, unit) -> bool:
        """The item cadence: whether an item position in ``unit`` is a multiple of
        ``eval_interval`` (families with other units override it)."""
        a = self.args
        if not a.eval_interval or not self.can_evaluate():
            return False
        return loop.is_due(a.eval_interval, unit.start, unit.count)

    # ----------------------------------------------------------------- data
    def get_train_dataloader(self):
        """The training dataset as given; each epoch visits it in the order of ``shuffle_dataset``."""
        if self.train_dataset is None:
            raise ValueError("Trainer: training requires a train_dataset.")
        return self.train_dataset

    def get_eval_dataloader(self):
        """The eval items, or None."""
        return self.eval_dataset

    # ----------------------------------------------------------------- train / evaluate / save
    def train(
        self,
        resume_from_checkpoint: str | None = None,
        checkpoint_dir: str | None = None,
        checkpoint_interval: int = 1,
        checkpoint_total_limit: int | None = None,
        checkpoint_every_batches: int | None = None,
        **generation_kwargs,
    ) -> None:
        """Train for every stage (``args.num_train_epochs`` epochs by default).

        Checkpoints (see docs/checkpointing.md): with ``checkpoint_dir`` a checkpoint is written
        after every ``checkpoint_interval``-th epoch and after the last one, and, when
        ``checkpoint_every_batches`` is set, inside epochs after every n-th rollout batch.
        ``checkpoint_total_limit`` keeps only the newest n. The config's ``save_steps`` adds
        a save every n steps of ``steps_unit``; without ``checkpoint_dir`` those (and the final
        one) go to ``<run dir>/checkpoints``. ``resume_from_checkpoint`` (a
        checkpoint, its directory's ``latest``, a run dir, or ``"latest"`` of ``checkpoint_dir``)
        continues a run exactly where that checkpoint left it, mid-epoch included. SIGINT or
        SIGTERM stop training after the current batch, write a checkpoint, and return with
        ``self.interrupted`` set.

        Extra keyword arguments go to ``model.generate`` during training rollouts.
        """
        check_generation_kwargs(generation_kwargs)
        from comlrl.core.checkpoint.session import CheckpointSession

        epoch_saves = checkpoint_dir is not None
        if checkpoint_dir is None and self.args.save_steps is not None:
            # save_steps alone: its checkpoints live in the run directory.
            checkpoint_dir = os.path.join(self._ensure_logger().run_dir, "checkpoints")
        session = CheckpointSession(
            self,
            resume_from_checkpoint,
            checkpoint_dir,
            checkpoint_interval,
            checkpoint_total_limit,
            checkpoint_every_batches=checkpoint_every_batches,
            save_steps=self.args.save_steps,
            epoch_saves=epoch_saves,
        )
        self.generation_kwargs = dict(generation_kwargs)
        loop.TrainingLoop(self, session).run()

    def evaluate(self, num_eval_samples: int | None = None) -> dict[str, float]:
        """Roll out one joint sample per eval item and turn; log and return turn metrics."""
        return evaluation.evaluate(self, num_eval_samples)

    def eval_metrics(self, items: list[dict]) -> dict[str, float]:
        """The metrics of one evaluation over ``items`` (families may add to them)."""
        return evaluation.evaluate_items(self, items)[0]

    @main_process_only
    @quietly
    def save_model(self, output_dir: str) -> None:
        """Write ``output_dir/agent_{i}/`` (model and tokenizer) for every agent (rank 0 writes;
        in multi-process training every rank calls this and returns once the files exist)."""
        for i, (model, tok) in enumerate(zip(self.agents, self.tokenizers)):
            path = os.path.join(output_dir, f"agent_{i}")
            model.save_pretrained(path)
            tok.save_pretrained(path)
        if self.logger is not None and self.logger.wandb is not None:
            self.logger.log({"final_model_saved": str(output_dir)}, self.env_step)
