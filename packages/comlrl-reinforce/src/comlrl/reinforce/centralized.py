"""Centralized MAGRPO: one model plays every role.

The single actor receives a joint prompt built by an adapter from every role's own prompt, and
writes all role outputs in one completion. Training is GRPO on that joint completion; the outputs
are split back into roles only to call the unchanged multi-agent reward and the eval logger. It is
the centralized baseline against decentralized MAGRPO, where every role has its own policy.
"""

from __future__ import annotations

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
    CentralizedComparatorAdapter,
    CentralizedComparatorParseError,
    TaggedCentralizedComparatorAdapter,
    centralize,
    check_adapter,
)
from comlrl.core.centralized.layout import check_parse_mode
from comlrl.core.config.fields import knob
from comlrl.core.config.validation import check_int, check_optional_int, normalize_choice
from comlrl.core.inputs import TrainerInputs, inputs_from
from comlrl.reinforce.config import MAGRPOConfig
from comlrl.reinforce.layout_warmup import warm_up_layout
from comlrl.reinforce.magrpo import MAGRPOTrainer

__all__ = [
    "CentralizedComparatorAdapter",
    "CentralizedComparatorParseError",
    "CentralizedMAGRPOConfig",
    "CentralizedMAGRPOTrainer",
    "TaggedCentralizedComparatorAdapter",
]


@dataclass
class CentralizedInputs(TrainerInputs):
    """The trainer inputs plus the adapter that builds the joint prompt and splits outputs."""

    centralized_adapter: Any = None


COLLABORATION_ALIASES = {"centralised": "centralized", "single_agent": "centralized"}


@dataclass
class CentralizedMAGRPOConfig(MAGRPOConfig):
    """MAGRPO settings for one joint actor.

    ``num_agents`` is the number of roles the actor writes (default 2), ``num_generations`` counts
    joint responses, and ``max_new_tokens`` is the budget of the whole joint response. Only
    single-turn training is supported.
    """

    num_agents: int | None = 2
    num_turns: int = 1
    collaboration_mode: str = knob(
        "centralized", help="Must be `centralized` (aliases: centralised, single_agent)."
    )
    centralized_parse: str = knob(
        "lenient",
        help="How the default tagged adapter reads the joint completion. `lenient`: the prompt "
        "opens the first role's `<agent_0>` section, tags match loosely (case, spacing, closing "
        "tags optional) and the reward above its declared lower bound is scaled by the share "
        "of roles produced; `strict`: closed `<agent_i>...</agent_i>` blocks only, no scaling "
        "(CoMLRL 1.4.3). A `centralized_adapter` passed to the trainer is used as it is.",
    )
    layout_warmup_steps: int = knob(
        0,
        help="Supervised steps before RL that teach the writer the adapter's layout on its own "
        "answers to each role's prompt (0: none). For models that never sample the layout.",
    )
    layout_warmup_learning_rate: float | None = knob(
        None, help="Learning rate of the layout warm-up (null: `agent_learning_rate`)."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_optional_int("num_agents", self.num_agents, 1)
        self.centralized_parse = check_parse_mode(self.centralized_parse, "centralized_parse")
        check_int("layout_warmup_steps", self.layout_warmup_steps, 0)
        lr = self.layout_warmup_learning_rate
        if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float)) or lr <= 0):
            raise ValueError(
                f"layout_warmup_learning_rate must be a positive number or null, got {lr!r}."
            )
        if not isinstance(self.collaboration_mode, str) or (
            COLLABORATION_ALIASES.get(
                self.collaboration_mode.strip().lower(), self.collaboration_mode.strip().lower()
            )
            != "centralized"
        ):
            raise ValueError(
                "collaboration_mode: CentralizedMAGRPOConfig requires centralized collaboration "
                f"(collaboration_mode='centralized'), got {self.collaboration_mode!r}."
            )
        self.collaboration_mode = normalize_choice(
            "collaboration_mode", self.collaboration_mode, ("centralized",), COLLABORATION_ALIASES
        )
        if self.num_turns != 1:
            raise ValueError(
                "num_turns: Centralized MAGRPO currently supports num_turns=1 only, "
                f"got {self.num_turns}."
            )


class CentralizedMAGRPOTrainer(MAGRPOTrainer):
    """GRPO on one joint actor that writes every role's output (CoMLRL-compatible).

    Args:
        num_agents: the number of roles; must equal ``args.num_agents`` when both are set.
        agents: at most one actor model (or pass ``agent_model``).
        tokenizer: one tokenizer (or a one-element list).
        reward_func: the multi-agent task reward, called on the split role outputs.
        formatters: one formatter per role (or one shared).
        centralized_adapter: builds the joint prompt and splits the joint completion; defaults to
            :class:`TaggedCentralizedComparatorAdapter` in ``args.centralized_parse`` mode.

    Joint completions that hold no role section are scored as all-empty outputs and counted
    (``centralized/parse_failures``); every training record also carries the share of the
    step's joint completions that missed a role (``centralized/parse_failure_rate``). With
    ``args.layout_warmup_steps``, :meth:`train` first teaches the writer the layout
    (:mod:`comlrl.reinforce.layout_warmup`).
    """

    algorithm_name = "MAGRPO"
    default_config_cls = CentralizedMAGRPOConfig

    inputs_cls = CentralizedInputs

    def __init__(
        self,
        agent_model: ModelSource | None = None,
        agents: Sequence[ModelSource] | None = None,
        num_agents: int | None = None,
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
        args: CentralizedMAGRPOConfig | None = None,
        *,
        centralized_adapter: Any = None,
        model: ModelSource | None = None,
    ) -> None:
        """Build the trainer from CoMLRL 1.4.3's arguments, in its order (see
        :class:`~comlrl.reinforce.MAGRPOTrainer`); one model writes every role, and
        ``centralized_adapter`` builds the joint prompt and splits the joint output (the tagged
        adapter by default)."""
        self.setup(inputs_from(CentralizedInputs, locals()))

    def setup(self, inputs: CentralizedInputs) -> None:
        """Check the centralized config, then build one actor for every role."""
        args = inputs.args if inputs.args is not None else self.default_config_cls()
        if getattr(args, "collaboration_mode", None) != "centralized":
            raise ValueError(
                "CentralizedMAGRPOTrainer requires centralized configuration "
                "(args.collaboration_mode='centralized'); pass a CentralizedMAGRPOConfig."
            )
        if args.num_turns != 1:
            raise ValueError("num_turns: Centralized MAGRPO currently supports num_turns=1 only.")
        adapter = check_adapter(
            inputs.centralized_adapter
            if inputs.centralized_adapter is not None
            else TaggedCentralizedComparatorAdapter(mode=args.centralized_parse)
        )
        actor_inputs, _, collaboration = centralize(inputs, args, adapter)
        super().setup(actor_inputs)
        # Restore the role count on the trainer's own config (in multi-process runs that copy
        # also holds this rank's share of the batch sizes, so it is kept).
        self.args.num_agents = collaboration.num_roles
        self.global_args = args
        self.collaboration = collaboration
        self.centralized_adapter = adapter
        self.num_roles = collaboration.num_roles
        collaboration.recording = lambda: not self.timing.evaluating
        self.layout_warmed_up = False
        self.warmup_metrics: dict[str, float] | None = None
        self.reporting.record_extras.append(self._record_extras)

    # Centralized training runs in one process: its layout warm-up is not sharded over ranks.
    multi_process_ready = False

    def before_training(self, resume_from_checkpoint: str | None) -> None:
        """A ``layout_warmup_steps`` warm-up runs before training (once per run, resumes skip
        it), once ``train()``'s arguments are checked."""
        steps = self.args.layout_warmup_steps
        if steps and not self.layout_warmed_up and resume_from_checkpoint is None:
            self.warmup_metrics = warm_up_layout(self, steps)
            self.layout_warmed_up = True

    def state_dict(self) -> dict[str, Any]:
        """MAGRPO's state plus whether the layout warm-up ran."""
        return {**super().state_dict(), "layout_warmed_up": self.layout_warmed_up}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        super().load_state_dict(state)
        self.layout_warmed_up = bool(state.get("layout_warmed_up", False))

    def run_config(self) -> dict[str, Any]:
        cfg = super().run_config()
        cfg.update(collaboration_mode="centralized", num_roles=self.num_roles, num_actor_models=1)
        return cfg

    def _record_extras(self) -> dict[str, Any]:
        """What every logged record carries: the running parse-failure count of the joint
        completions, and in the first record only, the layout warm-up's losses."""
        extras = dict(self.collaboration.stats())
        extras.update(self.warmup_metrics or {})
        self.warmup_metrics = None
        return extras
