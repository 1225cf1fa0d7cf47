"""Configuration of the actor-critic family (IAC and MAAC).

Field names and defaults follow CoMLRL 1.4.3, except where noted on the field: we validate every
field, ``num_agents`` defaults to None (taken from the trainer's agents), multi-turn episodes run
to ``num_turns`` unless an ``early_termination_threshold`` is set, and ``value_clip_range`` applies
to every kind of critic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from comlrl.core.config.validation import (
    check_bool,
    check_int,
    check_number,
    check_optional_int,
    normalize_choice,
)
from comlrl.core.devices import normalize_parallel_training, validate_device_spec
from comlrl.core.distributed import MODES as DISTRIBUTED_MODES

CRITIC_TYPES = ("v", "q")
REWARD_CALL_MODES = ("auto", "batch", "per_sample")
NONFINITE_POLICIES = ("raise", "skip")


@dataclass
class ActorCriticConfig:
    """Settings shared by IAC and MAAC. Use :class:`IACConfig` or :class:`MAACConfig`."""

    agent_learning_rate: float = 5.0e-6
    critic_learning_rate: float | None = 5.0e-6
    rollout_buffer_size: int = 8
    train_batch_size: int | None = None
    value_clip_range: float | None = 0.2
    value_loss_coef: float = 0.6
    advantage_normalization: bool = True
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = None
    num_train_epochs: int = 40
    critic_type: str = "v"
    critic_value_head_hidden_dim: int | None = None
    num_agents: int | None = None
    num_turns: int = 2
    num_generations: int = 1
    parallel_training: str = "none"
    agent_devices: Any = None
    critic_devices: Any = None
    external_prompt_passthrough: bool = False
    discount: float = 1.0
    eval_interval: int = 16
    eval_num_samples: int = 4
    eval_batch_size: int = 1
    early_termination_threshold: float | None = None
    logging_steps: int = 1
    reference_kl_enabled: bool = False
    reference_kl_coef: float = 0.1
    reference_devices: Any = None
    # --- beyond the reference ---
    seed: int | None = None
    output_dir: str | None = None
    rollout_batch_size: int | None = None
    generation_batch_size: int | None = None
    logprob_max_tokens: int | None = None
    max_grad_norm: float | None = None
    weight_decay: float = 0.01
    reward_call_mode: str = "auto"
    nonfinite_loss: str = "raise"
    eval_greedy: bool = False
    # Multi-process data parallelism (docs/distributed.md).
    distributed_mode: str = "auto"
    item_seeded_sampling: bool = False

    _family = "Actor-critic"

    def __post_init__(self) -> None:
        check_number("agent_learning_rate", self.agent_learning_rate, 0.0, min_inclusive=False)
        if self.critic_learning_rate is None:
            self.critic_learning_rate = self.agent_learning_rate
        check_number("critic_learning_rate", self.critic_learning_rate, 0.0, min_inclusive=False)
        check_int("rollout_buffer_size", self.rollout_buffer_size, 1)
        if self.train_batch_size is None:
            self.train_batch_size = self.rollout_buffer_size
        check_int("train_batch_size", self.train_batch_size, 1)
        check_number(
            "value_clip_range", self.value_clip_range, 0.0, min_inclusive=False, allow_none=True
        )
        check_number("value_loss_coef", self.value_loss_coef, 0.0, min_inclusive=False)
        check_bool("advantage_normalization", self.advantage_normalization)
        check_int("max_new_tokens", self.max_new_tokens, 1)
        check_number("temperature", self.temperature, 0.0, min_inclusive=False)
        check_number("top_p", self.top_p, 0.0, 1.0, min_inclusive=False)
        check_optional_int("top_k", self.top_k, 0)
        check_int("num_train_epochs", self.num_train_epochs, 1)
        self.critic_type = normalize_choice("critic_type", self.critic_type, CRITIC_TYPES)
        check_optional_int("critic_value_head_hidden_dim", self.critic_value_head_hidden_dim, 1)
        check_optional_int("num_agents", self.num_agents, 1)
        check_int("num_turns", self.num_turns, 1)
        check_int("num_generations", self.num_generations, 1)
        if self.num_turns > 1 and self.num_generations != 1:
            raise ValueError(
                f"num_generations must be 1 when num_turns > 1: multi-turn {self._family} "
                f"follows one trajectory per item (got num_generations={self.num_generations}, "
                f"num_turns={self.num_turns})."
            )
        self.parallel_training = normalize_parallel_training(self.parallel_training)
        self._check_devices()
        check_bool("external_prompt_passthrough", self.external_prompt_passthrough)
        check_number("discount", self.discount, 0.0, 1.0)
        check_int("eval_interval", self.eval_interval, 0)
        check_int("eval_num_samples", self.eval_num_samples, 0)
        check_int("eval_batch_size", self.eval_batch_size, 1)
        check_number(
            "early_termination_threshold", self.early_termination_threshold, allow_none=True
        )
        check_int("logging_steps", self.logging_steps, 1)
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

    def _check_devices(self) -> None:
        if self.parallel_training == "mp" and self.agent_devices is None:
            raise ValueError("parallel_training='mp' requires explicit agent_devices.")
        validate_device_spec(self.agent_devices, "agent_devices", self.num_agents)

    @property
    def uses_q_critic(self) -> bool:
        """True for Q(h, a) critics, False for V(h)."""
        return self.critic_type == "q"


@dataclass
class IACConfig(ActorCriticConfig):
    """Settings of IAC (independent actor-critic): every agent has its own critic, either a
    separate model (``use_separate_critic=True``) or a value head on its actor.

    ``critic_learning_rate`` (None → ``agent_learning_rate``) is the critic's learning rate, and
    in value-head mode the head's. ``critic_value_head_hidden_dim`` shapes a separate critic's
    head; ``value_head_hidden_dim`` shapes a head on the actor. ``value_clip_range`` clips the
    value update of both kinds.
    """

    use_separate_critic: bool = True
    value_head_hidden_dim: int | None = None

    _family = "IAC"

    def __post_init__(self) -> None:
        check_bool("use_separate_critic", self.use_separate_critic)
        check_optional_int("value_head_hidden_dim", self.value_head_hidden_dim, 1)
        super().__post_init__()
        if self.use_separate_critic and self.value_head_hidden_dim is not None:
            raise ValueError(
                "value_head_hidden_dim shapes a value head on the actor, which exists only with "
                "use_separate_critic=False; set critic_value_head_hidden_dim for separate critics."
            )
        if not self.use_separate_critic and self.critic_value_head_hidden_dim is not None:
            raise ValueError(
                "critic_value_head_hidden_dim shapes a separate critic's head; with "
                "use_separate_critic=False set value_head_hidden_dim instead."
            )

    def _check_devices(self) -> None:
        super()._check_devices()
        if not self.use_separate_critic:
            # Value heads live on their actors' devices; the trainer checks that critic_devices
            # (accepted as in 1.4.3) names those devices once the agents are placed.
            validate_device_spec(self.critic_devices, "critic_devices", self.num_agents)
            return
        if self.parallel_training == "mp" and self.critic_devices is None:
            raise ValueError(
                "parallel_training='mp' with use_separate_critic=True requires critic_devices."
            )
        validate_device_spec(self.critic_devices, "critic_devices", self.num_agents)


@dataclass
class MAACConfig(ActorCriticConfig):
    """Settings of MAAC: the agents' actors share one centralized critic that reads the joint
    observation (every agent's prompt, plus the joint action for a Q critic).

    ``value_clip_range`` defaults to None (the reference never clipped MAAC's critic); set it to
    clip the critic's update. ``critic_value_head_hidden_dim`` replaces the reference's
    ``model_config["critic_value_head_hidden_dim"]`` (still read when this field is None).
    """

    value_clip_range: float | None = None

    _family = "MAAC"

    def _check_devices(self) -> None:
        super()._check_devices()
        if self.parallel_training == "mp" and self.critic_devices is None:
            raise ValueError("parallel_training='mp' requires critic_devices for MAAC's critic.")
        if self.critic_devices is not None:
            if isinstance(self.critic_devices, (list, tuple)) and len(self.critic_devices) != 1:
                raise ValueError(
                    f"critic_devices: MAAC has one critic; give one device, got "
                    f"{self.critic_devices!r}."
                )
            validate_device_spec(self.critic_devices, "critic_devices", 1)
