"""Configuration of the REINFORCE family (MAGRPO and its variants)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from comlrl.core.compat_notices import note_discount_applies
from comlrl.core.config.validation import (
    check_bool,
    check_int,
    check_number,
    check_optional_int,
    normalize_choice,
)
from comlrl.core.devices import normalize_parallel_training, validate_device_spec
from comlrl.core.distributed import MODES as DISTRIBUTED_MODES
from comlrl.core.rollout.tree import JOINT_MODE_ALIASES, JOINT_MODES

ADVANTAGE_MODES = ("mean", "raw", "max", "rloo")
NORMALIZATION_SCOPES = ("group", "batch")
LENGTH_NORMALIZATIONS = ("none", "token_mean", "constant")
VARIANTS = ("grpo", "dr_grpo", "reinforce_pp")
REWARD_CALL_MODES = ("auto", "batch", "per_sample")
NONFINITE_POLICIES = ("raise", "skip")


@dataclass
class MAGRPOConfig:
    """Settings of MAGRPO (multi-agent GRPO) and its REINFORCE variants.

    Field names and defaults follow CoMLRL 1.4.3, except ``early_termination_threshold`` (None:
    multi-turn trees grow to ``num_turns``) and ``num_agents`` (None: taken from the trainer).
    Every field is validated on construction; see docs/configuration.md for each knob.
    """

    num_train_epochs: int = 20
    agent_learning_rate: float = 5.0e-6
    logging_steps: int = 50
    num_agents: int | None = None
    parallel_training: str = "none"
    agent_devices: Any = None
    num_generations: int = 4
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    num_turns: int = 2
    discount: float = 1.0
    joint_mode: str = "aligned"
    early_termination_threshold: float | None = None
    external_prompt_passthrough: bool = False
    eval_interval: int = 16
    eval_num_samples: int = 4
    eval_batch_size: int = 1
    rollout_buffer_size: int = 2
    train_batch_size: int | None = None
    advantage_normalization: bool = True
    advantage_mode: str = "mean"
    reference_kl_enabled: bool = False
    reference_kl_coef: float = 0.1
    reference_devices: Any = None
    # --- beyond the reference ---
    seed: int | None = None
    output_dir: str | None = None
    rollout_batch_size: int | None = None
    generation_batch_size: int | None = None
    logprob_max_tokens: int | None = None
    advantage_normalization_scope: str = "group"
    loss_length_normalization: str = "none"
    variant: str | None = None
    max_grad_norm: float | None = None
    weight_decay: float = 0.01
    reward_call_mode: str = "auto"
    nonfinite_loss: str = "raise"
    eval_greedy: bool = False
    # Multi-process data parallelism (docs/distributed.md).
    distributed_mode: str = "auto"
    item_seeded_sampling: bool = False

    def __post_init__(self) -> None:
        check_int("num_train_epochs", self.num_train_epochs, 1)
        check_number("agent_learning_rate", self.agent_learning_rate, 0.0, min_inclusive=False)
        check_int("logging_steps", self.logging_steps, 1)
        check_optional_int("num_agents", self.num_agents, 1)
        self.parallel_training = normalize_parallel_training(self.parallel_training)
        if self.parallel_training == "mp" and self.agent_devices is None:
            raise ValueError("parallel_training='mp' requires explicit agent_devices.")
        validate_device_spec(self.agent_devices, "agent_devices", self.num_agents)
        check_int("num_generations", self.num_generations, 2)
        check_int("max_new_tokens", self.max_new_tokens, 1)
        check_number("temperature", self.temperature, 0.0, min_inclusive=False)
        check_number("top_p", self.top_p, 0.0, 1.0, min_inclusive=False)
        check_optional_int("top_k", self.top_k, 0)
        check_int("num_turns", self.num_turns, 1)
        check_number("discount", self.discount, 0.0, 1.0)
        note_discount_applies(
            self.discount, self.num_turns, type(self).__name__.removesuffix("Config")
        )
        self.joint_mode = normalize_choice(
            "joint_mode", self.joint_mode, JOINT_MODES, JOINT_MODE_ALIASES
        )
        check_number(
            "early_termination_threshold", self.early_termination_threshold, allow_none=True
        )
        check_bool("external_prompt_passthrough", self.external_prompt_passthrough)
        check_int("eval_interval", self.eval_interval, 0)
        check_int("eval_num_samples", self.eval_num_samples, 0)
        check_int("eval_batch_size", self.eval_batch_size, 1)
        check_int("rollout_buffer_size", self.rollout_buffer_size, 1)
        if self.train_batch_size is None:
            self.train_batch_size = self.rollout_buffer_size
        check_int("train_batch_size", self.train_batch_size, 1)
        check_bool("advantage_normalization", self.advantage_normalization)
        self.advantage_mode = normalize_choice(
            "advantage_mode", self.advantage_mode, ADVANTAGE_MODES
        )
        check_bool("reference_kl_enabled", self.reference_kl_enabled)
        check_number("reference_kl_coef", self.reference_kl_coef, 0.0)
        if self.reference_kl_enabled:
            validate_device_spec(self.reference_devices, "reference_devices", self.num_agents)
        check_optional_int("seed", self.seed, 0)
        if self.output_dir is not None and not isinstance(self.output_dir, str):
            raise ValueError(f"output_dir must be a path string or None, got {self.output_dir!r}.")
        check_optional_int("rollout_batch_size", self.rollout_batch_size, 1)
        check_optional_int("generation_batch_size", self.generation_batch_size, 1)
        check_optional_int("logprob_max_tokens", self.logprob_max_tokens, 1)
        self.advantage_normalization_scope = normalize_choice(
            "advantage_normalization_scope",
            self.advantage_normalization_scope,
            NORMALIZATION_SCOPES,
        )
        self.loss_length_normalization = normalize_choice(
            "loss_length_normalization", self.loss_length_normalization, LENGTH_NORMALIZATIONS
        )
        if self.variant is not None:
            self.variant = normalize_choice(
                "variant",
                self.variant,
                VARIANTS,
                {"dr.grpo": "dr_grpo", "reinforce++": "reinforce_pp"},
            )
            self._apply_variant()
        check_number("max_grad_norm", self.max_grad_norm, 0.0, min_inclusive=False, allow_none=True)
        check_number("weight_decay", self.weight_decay, 0.0)
        self.reward_call_mode = normalize_choice(
            "reward_call_mode", self.reward_call_mode, REWARD_CALL_MODES
        )
        self.nonfinite_loss = normalize_choice(
            "nonfinite_loss", self.nonfinite_loss, NONFINITE_POLICIES
        )
        check_bool("eval_greedy", self.eval_greedy)
        self.distributed_mode = normalize_choice(
            "distributed_mode", self.distributed_mode, DISTRIBUTED_MODES
        )
        check_bool("item_seeded_sampling", self.item_seeded_sampling)

    def _apply_variant(self) -> None:
        """Presets of the single-agent methods, in their multi-agent form."""
        if self.variant == "dr_grpo":
            # Dr. GRPO: no std division, constant (max_new_tokens) length normalization.
            self.advantage_normalization = False
            self.loss_length_normalization = "constant"
        elif self.variant == "reinforce_pp":
            # REINFORCE++: z-score advantages over the whole update batch of each agent.
            self.advantage_normalization = True
            self.advantage_normalization_scope = "batch"


@dataclass
class MAREINFORCEConfig(MAGRPOConfig):
    """MAGRPO settings with the raw-return advantage (no baseline)."""

    advantage_mode: str = "raw"


@dataclass
class MARLOOConfig(MAGRPOConfig):
    """MAGRPO settings with the leave-one-out baseline."""

    advantage_mode: str = "rloo"


@dataclass
class MAReMaxConfig(MAGRPOConfig):
    """MAGRPO settings with the max baseline."""

    advantage_mode: str = "max"
