"""The trainer base every family builds on: inputs and wiring, and the family contract.

A family subclasses :class:`TrainerBase`, builds its own parts in ``setup`` (after
``super().setup(inputs)``) and implements the contract that :mod:`comlrl.core.loop` drives:
``collect(unit)`` and ``update(batch)``, optionally ``prepare(stage)``, ``end_stage(stage)``
and ``state_dict``/``load_state_dict``. The base owns everything else: models and devices,
the rollout backend, rewards, buffers, logging, evaluation and checkpoints, through the
collaborators it holds (``rollouts``, ``reporting``, ``checkpointing``, ``sync``,
``monitors``).
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import Any

from comlrl.core import loop
from comlrl.core.checkpoint.session import check_checkpoint_arguments
from comlrl.core.checkpoint.trainer_state import Checkpointing
from comlrl.core.distributed import (
    DistributedContext,
    init_context,
    local_context,
)
from comlrl.core.distributed.gradients import GradientSync
from comlrl.core.distributed.ranks import per_rank_config
from comlrl.core.input_checks import check_construction, check_generation_kwargs
from comlrl.core.inputs import TrainerInputs
from comlrl.core.logging.reporting import Reporting
from comlrl.core.logging.sink import require_sink_packages
from comlrl.core.loop import (
    evaluation,
    seed_everything,  # noqa: F401  (re-exported for families)
    step_cadence,
)
from comlrl.core.loop.buffer import RolloutBuffer
from comlrl.core.loop.run_state import RunState
from comlrl.core.loop.timing import DEFAULT_PHASES, PhaseTimer
from comlrl.core.models import build_agents, resolve_agents, shares_parameters
from comlrl.core.models.loading import check_sharing_with_adapters
from comlrl.core.models.setup import prepare_agents
from comlrl.core.monitors import Monitors
from comlrl.core.placement import plan_workers
from comlrl.core.quiet import quietly
from comlrl.core.rewards import RewardCaller
from comlrl.core.rollout.backends import build_rollout_backend
from comlrl.core.rollout.formatters import build_formatters, template_formatters
from comlrl.core.saving import main_process_only
from comlrl.core.training.schedule import LRSchedules, stage_count


class TrainerBase:
    """Inputs, wiring and defaults of the family contract. Subclasses set ``algorithm_name``
    and ``default_config_cls``.

    The work around the family's math is done by the functions of
    :mod:`comlrl.core.rollout.rollouts` (sampling, rewards, rollout trees, each taking the
    trainer) and by collaborators that ``setup`` builds: ``reporting`` (:class:`~comlrl.core.logging.reporting.Reporting`: logger, logging cadence,
    completions, progress bars), ``checkpointing``
    (:class:`~comlrl.core.checkpoint.trainer_state.Checkpointing`: the core's checkpoint state
    and sessions), ``sync`` (:class:`~comlrl.core.distributed.gradients.GradientSync`: gradient
    averaging and pooled statistics over ranks) and ``monitors``
    (:class:`~comlrl.core.monitors.Monitors`: the reward-hacking monitors), plus ``timing``.
    Family code and users call them directly (``trainer.reporting.log_record(...)``,
    ``trainer.reporting.run_dir``, ``trainer.timing.phase("update")``). The run's counters and
    flags are ``run_state`` (:class:`~comlrl.core.loop.run_state.RunState`), which the loop owns.
    """

    algorithm_name = "Base"
    default_config_cls: type | None = None
    inputs_cls: type = TrainerInputs
    # The timing/<phase> keys of the training records (a family with more phases extends it).
    timing_phases: tuple[str, ...] = DEFAULT_PHASES
    # What the family declares about its reports (``reporting`` reads them): the name under
    # which the progress bar shows the latest mean reward, what one bar step counts, whether
    # every training record carries every timing key (0.0 when nothing was timed), and the
    # config fields summarised in the W&B run config where the config has them.
    progress_metric = "reward"
    progress_unit = "item"
    # What a stage is called in progress bars.
    stage_label = "epoch"
    # Over what an update's per-turn return and KL are logged (one of
    # comlrl.core.rewards.reward_metrics.TURN_METRICS_OVER; None: the family logs no per-turn keys).
    turn_metrics_over: str | None = None
    timing_idle_throughput = False
    run_config_keys: tuple[str, ...] = (
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
    # Eval items whose completions are printed as a console table after each evaluation (0:
    # none; ``comlrl train`` sets it from ``output.console_completions``).
    console_completions = 0
    # A single process until setup joins the launcher's process group.
    dist: DistributedContext = local_context()
    rollout_buffer: RolloutBuffer | None = None
    # How a buffered sample becomes plain data and back (``use_buffer`` sets them).
    sample_cls: Any = None
    joint_sample_cls: Any = None
    # Keyword arguments of ``train()`` for the model's ``generate`` (set by ``train``).
    generation_kwargs: dict = {}
    # One frozen reference model per agent when the family keeps them (the reference-KL term
    # and the reference scores read them); empty otherwise.
    reference_models: Sequence[Any] = ()
    # The latest evaluation's first joint sample and its shown episodes (the console prints
    # them after the eval record; see comlrl.core.loop.evaluation).
    last_eval_sample: list | None = None
    last_eval_episodes: list | None = None
    # Whether the family may run under a multi-process launch: the shared loop shards global
    # batches across ranks, so a subclass that replaces ``train`` gets False unless it says
    # otherwise (see docs/distributed.md).
    multi_process_ready = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "train" in cls.__dict__ and "multi_process_ready" not in cls.__dict__:
            cls.multi_process_ready = False
        own = cls.__dict__.get("save_model")
        if own is not None and not getattr(own, "_main_process_only", False):
            # A family's own save_model gets the same rank handling as the base's.
            cls.save_model = main_process_only(quietly(own))  # type: ignore[method-assign]

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
        self.run_state = RunState()
        self.lr_schedules = LRSchedules()
        self.timing = PhaseTimer(self.timing_phases)
        self.checkpointing = Checkpointing()
        args = inputs.args
        if args is None:
            if self.default_config_cls is None:
                raise ValueError(
                    f"{type(self).__name__} needs args (it has no default_config_cls)."
                )
            args = self.default_config_cls()
        self.args = args
        # Multi-process data parallelism (see docs/distributed.md): ``global_args`` is the
        # config as written; ``args`` holds this rank's share of every global batch threshold.
        self.global_args = self.args
        self.dist = init_context(self.args.distributed_mode)
        if self.dist.is_distributed and not self.multi_process_ready:
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
        self.reporting = Reporting(
            self.args,
            self.dist,
            self.run_state,
            self.timing,
            algorithm=self.algorithm_name,
            progress_unit=self.progress_unit,
            progress_metric=self.progress_metric,
            idle_throughput=self.timing_idle_throughput,
        )
        self.monitors = Monitors(self.args, self.dist, self.run_state, self.reporting)
        self.model_config = dict(inputs.model_config or {})
        self.train_dataset, self.eval_dataset = inputs.train_dataset, inputs.eval_dataset
        self.external_transition, self.wandb_config = (
            inputs.external_transition,
            inputs.wandb_config,
        )
        require_sink_packages(self.args.report_to, inputs.wandb_config)
        self.eval_logger, self.eval_aggregator = inputs.eval_logger, inputs.eval_aggregator
        self.dataset_type = inputs.dataset_type
        sections = (inputs.wandb_config or {}).get("config_sections") or {}
        self.verbose = bool((sections.get("output") or {}).get("verbose", True))
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
        self.agent_devices, self.workers, worker_groups = plan_workers(
            self.args, self.dist, self.num_agents
        )
        self.sync = GradientSync(self.dist, worker_groups)
        if not load_models:
            return
        check_sharing_with_adapters(self.model_config, self.args.peft_config)
        self.agents, self.tokenizers = build_agents(
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
        self.reporting.diagnostics = getattr(self.rollout_backend, "drain_metrics", None)
        if self.dist.sharding == "fsdp":
            from comlrl.core.distributed.sharding import ShardedAgents

            # Before any optimizer exists: optimizers must hold the sharded parameters.
            self.sync.sharded = ShardedAgents(self.agents, self.dist)

    def use_buffer(self, capacity: int, sample_cls: Any, joint_sample_cls: Any = None) -> None:
        """Give the family a rollout buffer of ``capacity`` samples per agent, whose samples
        checkpoint through ``sample_cls.to_state``/``from_state``, and its shuffling RNG."""
        self.rollout_buffer = RolloutBuffer(self.num_agents, capacity)
        self.sample_cls, self.joint_sample_cls = sample_cls, joint_sample_cls
        self.shuffle_rng = random.Random(self.args.seed if self.args.seed is not None else 0)

    def fsdp_unsupported_reason(self, args) -> str | None:
        """Why this trainer cannot shard its agents with FSDP2 under ``args`` (None: it can)."""
        if not self.multi_process_ready:
            return "its training loop does not run under several processes"
        if args.parallel_training == "mp":
            return "parallel_training='mp' (agent worker threads) is not combined with FSDP"
        return None

    @property
    def env_step(self) -> int:
        """Joint actions rolled out so far in this run (the x-axis of the training records;
        :attr:`run_state` holds it with the run's other counters)."""
        return self.run_state.environment_steps

    def run_config(self) -> dict[str, Any]:
        """The run description logged to W&B: model, agent count, algorithm, and the config
        fields of ``run_config_keys`` that the config has (as written: global batch sizes).
        Families extend it through ``super()``."""
        a = self.global_args
        cfg: dict[str, Any] = {
            "model_name": self.model_name,
            "num_agents": self.num_agents,
            "algorithm": self.algorithm_name,
        }
        cfg.update({k: getattr(a, k) for k in self.run_config_keys if hasattr(a, k)})
        return cfg

    # ----------------------------------------------------------------- checkpoint contract
    def trainable_models(self) -> dict[str, Any]:
        """Named models whose weights a checkpoint holds."""
        return {f"agent_{i}": m for i, m in enumerate(self.agents)}

    def checkpoint_tokenizers(self) -> dict[str, Any]:
        """The tokenizer saved next to each named model of :meth:`trainable_models`."""
        return {f"agent_{i}": tok for i, tok in enumerate(getattr(self, "tokenizers", []))}

    def optimizers_list(self) -> list:
        """Every optimizer the checkpoint must hold, in a stable order."""
        return list(getattr(self, "optimizers", []))

    def checkpoint_loop_limits(self) -> tuple[int, int | None]:
        """(stages, cursor positions per stage) for checkpoint cursor checks and for telling a
        mid-stage save from a stage-end one (None: not known yet)."""
        return self.num_stages(), len(self.get_train_dataloader())

    def state_dict(self) -> dict[str, Any]:
        """The resumable state as plain data: the core's (:meth:`Checkpointing.core_state`);
        families extend it through ``super()`` with their own."""
        return self.checkpointing.core_state(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        self.checkpointing.load_core_state(self, state)

    # ----------------------------------------------------------------- the family contract
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
        """Roll out ``unit`` and return its experience (a
        :class:`~comlrl.core.loop.buffer.Batch`)."""
        raise NotImplementedError

    def update(self, batch) -> dict[str, float] | None:
        """Optimizer steps on a full buffer (or a collected batch); returns metrics to log."""
        raise NotImplementedError

    def end_stage(self, stage: int) -> None:
        """Hook: end-of-stage work once the buffer's remainder has been used."""

    def evaluation_due(self, unit) -> bool:
        """Whether the loop evaluates before ``unit``: never without an eval set or with
        ``eval_num_samples`` = 0; by ``eval_steps`` when it is set (the step cadence of
        :mod:`comlrl.core.loop.step_cadence`), otherwise by :meth:`eval_due`."""
        a = self.args
        if self.eval_dataset is None or a.eval_num_samples <= 0:
            return False
        if a.eval_steps is None:
            return self.eval_due(unit)
        return step_cadence.due(self.run_state, a.steps_unit, "eval", a.eval_steps)

    def eval_due(self, unit) -> bool:
        """The item cadence (once :meth:`evaluation_due` found something to evaluate): whether
        an item position in ``unit`` is a multiple of ``eval_interval`` (families with other
        units override it)."""
        every = self.args.eval_interval
        return bool(every) and loop.is_due(every, unit.start, unit.count)

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
        ``self.run_state.interrupted`` set (``run_state`` also says how else the call ended
        and its last checkpoint).

        Extra keyword arguments go to ``model.generate`` during training rollouts. The
        checkpoint integers are checked first, before anything else is read; any integral type
        (``numpy.int64`` too) is accepted.
        """
        checkpoint_interval, checkpoint_total_limit, checkpoint_every_batches = (
            check_checkpoint_arguments(
                checkpoint_interval, checkpoint_total_limit, checkpoint_every_batches
            )
        )
        check_generation_kwargs(generation_kwargs)
        self.before_training(resume_from_checkpoint)
        session = self.checkpointing.session(
            self,
            resume_from_checkpoint,
            checkpoint_dir,
            checkpoint_interval,
            checkpoint_total_limit,
            checkpoint_every_batches,
        )
        self.generation_kwargs = dict(generation_kwargs)
        self.checkpointing.training = True
        try:
            loop.TrainingLoop(session, self.run_state).run(self)
        finally:
            self.checkpointing.training = False
            self.checkpointing.remember(session)

    def before_training(self, resume_from_checkpoint: str | None) -> None:
        """Hook: work a family does once its ``train()`` arguments are checked, before the
        checkpoint session opens (``resume_from_checkpoint`` says whether the run resumes)."""

    def save_checkpoint(self, output_dir: str | os.PathLike) -> str | None:
        """Write a checkpoint of the trainer as it is now into the directory ``output_dir`` and
        return its path (the same files as one checkpoint of ``train(checkpoint_dir=...)``).
        Resume from it with ``train(resume_from_checkpoint=output_dir)`` or restore it with
        :meth:`load_checkpoint`. A checkpoint already there is replaced atomically; call it
        between ``train()`` calls, not during one."""
        return self.checkpointing.save_to(self, output_dir)

    def load_checkpoint(self, path: str | os.PathLike) -> dict[str, Any]:
        """Restore weights, optimizers, counters, callbacks and random generators from the
        checkpoint at ``path`` (written by :meth:`save_checkpoint` or by ``train``), after the
        same checks a resume runs; returns where it stands (``epoch``, ``position``,
        ``env_step``, ...). A later ``train()`` starts from the first epoch with this state;
        ``train(resume_from_checkpoint=path)`` continues from the checkpoint's position."""
        return self.checkpointing.load_from(self, path)

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
        self.reporting.note_saved_model(output_dir)
