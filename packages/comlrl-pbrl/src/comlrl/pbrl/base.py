"""What every preference trainer shares: construction, reference log-probs, the eval cadence
by training units, and the resumable state.

A run is a list of *stages* of the core loop (epochs for MADPO and MARLHF, iterations for the
iterative trainers). A trainer's ``prepare(stage)`` first builds the stage's data (samples
candidates, builds pairs, trains a reward model) and returns the stage's *units* of training
(one DPO update, or one RL batch); ``collect``/``update`` run them. The cursor ``(stage, unit)``
is what a checkpoint resumes from, and prepared data lives in the family state, so a resumed run
never samples its preference data again.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from comlrl.core.callable_types import (
    DatasetArg,
    FormatterArg,
    Hook,
    ModelSource,
    RewardArg,
    RewardProcessor,
    TokenizerArg,
)
from comlrl.core.centralized import (
    CentralizedCollaboration,
    TaggedCentralizedComparatorAdapter,
    centralize,
    check_adapter,
)
from comlrl.core.distributed import resolve_mode
from comlrl.core.input_checks import check_agent_count
from comlrl.core.inputs import TrainerInputs, inputs_from
from comlrl.core.placement.devices import plan_devices
from comlrl.core.rewards import RewardCaller
from comlrl.core.trainer import TrainerBase
from comlrl.pbrl import candidates
from comlrl.pbrl.config import MADPOConfig
from comlrl.pbrl.pairs import PreferencePair


@dataclass
class PreferenceInputs(TrainerInputs):
    """The trainer inputs plus the adapter of centralized collaboration."""

    centralized_comparator_adapter: Any = None


class PreferenceTrainerBase(TrainerBase):
    """What MADPO, MARLHF and their iterative variants share: construction, stages, the eval
    cadence by training units, and the resumable state.

    The constructor takes CoMLRL's MAGRPO arguments plus ``centralized_comparator_adapter``. With
    ``args.collaboration_mode="centralized"`` one actor model writes every role's output (the
    adapter builds its prompt and splits its completion); ``args.num_agents`` then counts roles.

    A trainer on this base implements the core contract itself (``prepare``, ``collect``,
    ``update``) and counts a training unit in ``units_done`` when it collects one (the
    ``eval_interval`` cadence counts those). An iterative trainer holds ``online``
    (:class:`~comlrl.pbrl.online.OnlineIterations`): its stages are then iterations, each ending
    with a policy snapshot when those are kept, and the iterations' state is checkpointed here.
    """

    algorithm_name = "Preference"
    default_config_cls: type = MADPOConfig
    checkpoint_kind = "preference"
    # Whether the family shards its preference data across ranks and averages its gradients
    # (every built-in preference trainer does; a subclass with its own loop may say no).
    multi_process_ready = True
    inputs_cls = PreferenceInputs

    def __init__(
        self,
        agent_model: ModelSource | None = None,
        agents: Sequence[ModelSource] | None = None,
        num_agents: int | None = 2,
        tokenizer: TokenizerArg | None = None,
        model_config: dict | None = None,
        train_dataset: DatasetArg | None = None,
        eval_dataset: DatasetArg | None = None,
        dataset_type: str | None = None,
        reward_func: RewardArg | None = None,
        reward_processor: RewardProcessor | None = None,
        formatters: FormatterArg | None = None,
        external_transition: Hook | None = None,
        wandb_config: dict | None = None,
        eval_logger: Hook | None = None,
        eval_aggregator: Hook | None = None,
        args: MADPOConfig | None = None,
        *,
        centralized_comparator_adapter: Any = None,
        model: ModelSource | None = None,
    ) -> None:
        """Build the trainer from CoMLRL 1.4.3's arguments, in its order (see
        :class:`~comlrl.reinforce.MAGRPOTrainer`); ``args`` is the family's config;
        ``centralized_comparator_adapter`` lays out a centralized comparator's prompt."""
        self.setup(inputs_from(PreferenceInputs, locals()))

    progress_unit = "step"
    run_config_keys = TrainerBase.run_config_keys + (
        "preference_num_candidates",
        "preference_pairs_per_sample",
        "pair_selection",
        "dpo_beta",
        "reference_free",
        "collaboration_mode",
    )
    timing_idle_throughput = True
    # The online iterations of an iterative trainer (:class:`~comlrl.pbrl.online.
    # OnlineIterations`); None for one offline round of sampling. With them a stage is an
    # iteration, which ends with a policy snapshot when those are kept.
    online: Any = None

    def fsdp_unsupported_reason(self, args) -> str | None:
        """The preference trainers replicate their agents (DDP-style) only."""
        return "the preference trainers do not shard their agents"

    def setup(self, inputs: PreferenceInputs) -> None:
        """Check the config, rewrite a centralized run as one actor, then build the actors."""
        args = inputs.args if inputs.args is not None else self.default_config_cls()
        if not isinstance(args, self.default_config_cls):
            raise ValueError(
                f"args must be a {self.default_config_cls.__name__}, got {type(args).__name__}."
            )
        adapter = check_adapter(
            inputs.centralized_comparator_adapter
            if inputs.centralized_comparator_adapter is not None
            else TaggedCentralizedComparatorAdapter(),
            "centralized_comparator_adapter",
        )
        self.centralized_comparator_adapter = adapter
        self.user_formatters = inputs.formatters
        self._model_config_arg = inputs.model_config
        self.task_reward_func = inputs.reward_func
        self.collaboration: CentralizedCollaboration | None = None
        actor_inputs = inputs.replace(args=args)
        if args.collaboration_mode == "centralized":
            actor_inputs, _, self.collaboration = centralize(inputs, args, adapter)
            self.num_roles = self.collaboration.num_roles
        elif inputs.agents is not None and inputs.agent_model is None:
            check_agent_count(inputs.agents, inputs.num_agents, type(self))
            actor_inputs = actor_inputs.replace(num_agents=None)
        if not self.multi_process_ready and resolve_mode(args.distributed_mode) != "single":
            # Refused before any model is loaded.
            raise ValueError(
                f"{self.algorithm_name} runs in one process; this trainer does not train under "
                "a multi-process launch (accelerate/torchrun, WORLD_SIZE > 1). "
                "Start it as a plain Python process (mp placement of agents on several GPUs "
                "works: parallel_training='mp'), or set distributed_mode='single'."
            )
        self._validate_before_loading(
            args,
            agent_model=inputs.agent_model,
            agents=inputs.agents,
            num_agents=actor_inputs.num_agents,
        )
        super().setup(actor_inputs)
        self.args = self.global_args = self.reporting.args = args
        if not args.reference_free and args.reference_devices is not None:
            plan_devices("mp", args.reference_devices, self.num_agents, "reference_devices")
        if self.collaboration is None:
            self.num_roles = self.num_agents
        self.reward_caller = RewardCaller(
            self.reward_func,
            num_agents=self.num_agents,
            reward_processor=self.reward_processor,
            call_mode=args.reward_call_mode,
        )
        seed = args.seed if args.seed is not None else 0
        self.pair_rng = random.Random(seed)
        self.order_seed = seed
        self.units_done = 0
        self.prepared_stage: int | None = None
        self.cursor = (0, 0)

    # ------------------------------------------------------------------ hooks
    def _validate_before_loading(self, args, *, agent_model, agents, num_agents) -> None:
        """Cheap checks a family runs before any model is loaded: here, that a DPO reference
        model's source resolves (its config is read; the weights load only when used)."""
        name = getattr(args, "reference_model_name", None)
        if name is not None and not args.reference_free:
            from transformers import AutoConfig

            try:
                AutoConfig.from_pretrained(
                    name,
                    trust_remote_code=bool(
                        (self._model_config_arg or {}).get("trust_remote_code", False)
                    ),
                )
            except OSError as exc:
                raise ValueError(
                    f"reference_model_name={name!r} cannot be found (not a local model directory "
                    f"nor a reachable hub id): {exc}"
                ) from exc

    def run_config(self) -> dict[str, Any]:
        cfg = super().run_config()
        if self.collaboration is not None:
            cfg.update(num_roles=self.num_roles, num_actor_models=1)
        return cfg

    # ------------------------------------------------------------------ preference data
    @property
    def reward_range(self):
        """The task reward's declared ``(low, high)`` range, or None."""
        if self.collaboration is not None:
            return self.collaboration.reward_range
        return self.reward_caller.reward_range

    def build_policy_pairs(
        self, items: Sequence[dict], params
    ) -> tuple[list[PreferencePair], dict]:
        """Pairs of the current policy's candidates for ``items`` and their statistics (see
        :func:`comlrl.pbrl.candidates.build_policy_pairs`)."""
        return candidates.build_policy_pairs(self, items, params)

    def score_joint(
        self, texts: list[list[list[str]]], prompts: list[str], items: Sequence[dict]
    ) -> tuple[list[list[float]], list[list[float]]]:
        """Raw and processed task rewards of aligned joint candidates as ``[item][k]`` (see
        :func:`comlrl.pbrl.candidates.score_joint_agents`)."""
        raw, processed, _ = candidates.score_joint_agents(self, texts, prompts, items)
        return raw, processed

    # ------------------------------------------------------------------ stages
    def num_stages(self) -> int:
        """Epochs, or the online iterations of an iterative trainer."""
        return self.args.num_online_iterations if self.online is not None else super().num_stages()

    @property
    def stage_label(self) -> str:
        """What a stage is called in progress bars: an online iteration, or an epoch."""
        return "iteration" if self.online is not None else "epoch"

    def end_stage(self, stage: int) -> None:
        """After an online iteration, snapshot the policy (when snapshots are kept)."""
        if self.online is not None:
            self.online.end_iteration(self, stage)

    @property
    def iteration_pairs(self) -> list[PreferencePair]:
        """The current online iteration's training pairs (none without iterations)."""
        return [] if self.online is None else self.online.pairs

    # ------------------------------------------------------------------ the eval cadence
    def eval_due(self, unit) -> bool:
        """Evaluate before every ``eval_interval``-th training unit."""
        every = self.args.eval_interval
        return bool(every) and self.units_done % every == 0

    def checkpoint_loop_limits(self) -> tuple[int, int | None]:
        """(stages, units of the current stage) for checkpoint cursor checks; the unit count is
        None until the stage's data exists."""
        return self.num_stages(), self.run_state.stage_size

    # ------------------------------------------------------------------ resumable state
    def state_dict(self) -> dict[str, Any]:
        rng = self.pair_rng.getstate()
        state = super().state_dict()
        state.update(
            kind=self.checkpoint_kind,
            units_done=self.units_done,
            prepared_stage=self.prepared_stage,
            pair_rng=[rng[0], list(rng[1]), rng[2]],
        )
        if self.collaboration is not None:
            state["parse_failures"] = self.collaboration.parse_failures
            state["parsed"] = self.collaboration.parsed
        if self.online is not None:
            state.update(self.online.state_dict())
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != self.checkpoint_kind:
            raise ValueError(
                f"checkpoint holds a {state.get('kind')!r} run, not {self.checkpoint_kind!r}."
            )
        super().load_state_dict(state)
        self.units_done = int(state["units_done"])
        self.prepared_stage = state["prepared_stage"]
        rng = state["pair_rng"]
        self.pair_rng.setstate((rng[0], tuple(rng[1]), rng[2]))
        if self.collaboration is not None:
            self.collaboration.parse_failures = int(state.get("parse_failures", 0))
            self.collaboration.parsed = int(state.get("parsed", 0))
        if self.online is not None:
            self.online.load_state_dict(state)

    def warn_no_pairs(self) -> None:
        """Say that sampling found no preference pairs (every item's candidates tied)."""
        warnings.warn(
            f"{self.algorithm_name}: every item's candidates tied on reward, so there are no "
            "preference pairs to train on; sample more candidates or use a finer reward.",
            stacklevel=3,
        )
