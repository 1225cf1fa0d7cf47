"""Configuration of MADPO and MARLHF.

Field names and defaults follow CoMLRL 1.4.3 with these exceptions: ``num_agents`` defaults to
None (taken from the trainer and cross-checked), ``reward_model_device`` defaults to None (the
first agent's device, never a hard-coded "cuda:0"), and MARLHF's ``advantage_mode`` defaults to
None (derived from ``rl_algorithm``; an explicit, conflicting value raises instead of being
overwritten). Every field is validated in ``__post_init__``; errors name the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from comlrl.core.config.validation import (
    check_bool,
    check_int,
    check_number,
    check_optional_int,
    normalize_choice,
)
from comlrl.core.devices import normalize_parallel_training, validate_device_spec
from comlrl.core.distributed import MODES as DISTRIBUTED_MODES

COLLABORATION_MODES = ("decentralized", "centralized")
COLLABORATION_ALIASES = {
    "decentralised": "decentralized",
    "multi_agent": "decentralized",
    "multi-agent": "decentralized",
    "centralised": "centralized",
    "single_agent": "centralized",
    "single-agent": "centralized",
}
PAIR_SELECTIONS = ("reward_gap", "all", "random")
ADVANTAGE_MODES = ("mean", "raw", "max", "rloo")
NONFINITE_POLICIES = ("raise", "skip")
REWARD_CALL_MODES = ("auto", "batch", "per_sample")

# rl_algorithm -> the advantage baseline of that REINFORCE variant (None: actor-critic)
RL_ALGORITHMS: dict[str, str | None] = {
    "magrpo": "mean",
    "mareinforce": "raw",
    "maremax": "max",
    "marloo": "rloo",
    "iac": None,
    "maac": None,
}
RL_ALIASES = {"mareforce": "mareinforce"}


def _check_optional_str(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string or None, got {value!r}.")


@dataclass
class MADPOConfig:
    """Settings of MADPO: multi-agent DPO on preference pairs ranked by the task reward.

    The pair set is built once from the initial policy: every agent samples
    ``preference_num_candidates`` completions per item, joint candidates are aligned by index and
    scored with the task reward, and ordered pairs with a reward gap are selected
    (``pair_selection``, at most ``preference_pairs_per_sample`` per item). DPO then runs for
    ``num_train_epochs`` epochs over the pairs, ``train_batch_size`` pairs per update.

    ``reference_free=True`` (the CoMLRL behaviour) uses no reference policy. With
    ``reference_free=False`` the margins are measured against a reference: the initial agents, or
    ``reference_model_name`` when set; its log-probs are computed once per pair and cached.
    """

    num_train_epochs: int = 20
    agent_learning_rate: float = 5.0e-6
    logging_steps: int = 50
    num_agents: int | None = None
    collaboration_mode: str = "decentralized"
    parallel_training: str = "none"
    agent_devices: Any = None
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    num_turns: int = 1
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
    advantage_mode: str | None = "mean"
    reference_kl_enabled: bool = False
    reference_kl_coef: float = 0.1
    reference_devices: Any = None
    preference_num_candidates: int = 80
    preference_pairs_per_sample: int | None = 16
    pair_selection: str = "reward_gap"
    dpo_beta: float = 0.1
    use_environment_step: bool = True
    environment_steps_per_pair: int = 2
    # --- beyond the reference ---
    reference_free: bool = True
    reference_model_name: str | None = None
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
    # Multi-process data parallelism, MADPO only (docs/distributed.md).
    distributed_mode: str = "auto"

    # Which pair selections this config accepts (the iterative configs add one).
    pair_selections: ClassVar[tuple[str, ...]] = PAIR_SELECTIONS
    # MADPO has no reference-KL term; MARLHF passes it to its RL phase.
    accepts_reference_kl: ClassVar[bool] = False
    algorithm_label: ClassVar[str] = "MADPO"

    def __post_init__(self) -> None:
        self._validate_common()
        self._validate_preference()

    # ------------------------------------------------------------------ shared fields
    def _validate_common(self) -> None:
        label = self.algorithm_label
        check_int("num_train_epochs", self.num_train_epochs, 1)
        check_number("agent_learning_rate", self.agent_learning_rate, 0.0, min_inclusive=False)
        check_int("logging_steps", self.logging_steps, 1)
        check_optional_int("num_agents", self.num_agents, 1)
        self.collaboration_mode = normalize_choice(
            "collaboration_mode",
            self.collaboration_mode,
            COLLABORATION_MODES,
            COLLABORATION_ALIASES,
        )
        self.parallel_training = normalize_parallel_training(self.parallel_training)
        if self.parallel_training == "mp" and self.agent_devices is None:
            raise ValueError("parallel_training='mp' requires explicit agent_devices.")
        actors = 1 if self.collaboration_mode == "centralized" else self.num_agents
        validate_device_spec(self.agent_devices, "agent_devices", actors)
        check_int("max_new_tokens", self.max_new_tokens, 1)
        check_number("temperature", self.temperature, 0.0, min_inclusive=False)
        check_number("top_p", self.top_p, 0.0, 1.0, min_inclusive=False)
        check_optional_int("top_k", self.top_k, 0)
        check_int("num_turns", self.num_turns, 1)
        if self.num_turns != 1:
            raise ValueError(
                f"num_turns: {label} currently supports num_turns=1 only, got {self.num_turns}."
            )
        check_number("discount", self.discount, 0.0, 1.0)
        self.joint_mode = normalize_choice(
            "joint_mode", self.joint_mode, ("aligned",), {"align": "aligned"}
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
        if self.advantage_mode is not None:
            self.advantage_mode = normalize_choice(
                "advantage_mode", self.advantage_mode, ADVANTAGE_MODES
            )
        check_bool("reference_kl_enabled", self.reference_kl_enabled)
        if self.reference_kl_enabled and not self.accepts_reference_kl:
            raise ValueError(
                f"reference_kl_enabled: {label} has no reference-KL term (the reference package "
                "loaded reference models here and never used them); set reference_free=False "
                "for DPO margins against a reference policy."
            )
        check_number("reference_kl_coef", self.reference_kl_coef, 0.0)
        if self.reference_kl_enabled or not getattr(self, "reference_free", True):
            validate_device_spec(self.reference_devices, "reference_devices", actors)
        check_optional_int("seed", self.seed, 0)
        _check_optional_str("output_dir", self.output_dir)
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
        # The preference trainers replicate their agents: no "fsdp".
        self.distributed_mode = normalize_choice(
            "distributed_mode",
            self.distributed_mode,
            tuple(m for m in DISTRIBUTED_MODES if m != "fsdp"),
        )

    # ------------------------------------------------------------------ preference fields
    def _validate_preference(self) -> None:
        check_int("preference_num_candidates", self.preference_num_candidates, 2)
        check_optional_int("preference_pairs_per_sample", self.preference_pairs_per_sample, 1)
        self.pair_selection = normalize_choice(
            "pair_selection", self.pair_selection, self.pair_selections
        )
        if self.pair_selection == "all" and self.preference_pairs_per_sample is not None:
            raise ValueError(
                "preference_pairs_per_sample must be None when pair_selection='all' (every "
                "non-tied pair is kept); set it to None or pick another pair_selection."
            )
        check_number("dpo_beta", self.dpo_beta, 0.0, min_inclusive=False)
        check_bool("use_environment_step", self.use_environment_step)
        check_int("environment_steps_per_pair", self.environment_steps_per_pair, 1)
        check_bool("reference_free", self.reference_free)
        _check_optional_str("reference_model_name", self.reference_model_name)
        if self.reference_model_name is not None and self.reference_free:
            raise ValueError(
                "reference_model_name is only used with reference_free=False; set "
                "reference_free=False or drop reference_model_name."
            )

    @property
    def actor_count(self) -> int | None:
        """Models that are trained: one in centralized collaboration, else ``num_agents``."""
        return 1 if self.collaboration_mode == "centralized" else self.num_agents


@dataclass
class MARLHFConfig(MADPOConfig):
    """Settings of MARLHF: preference pairs → a joint reward model → multi-agent RL.

    The pairs are built as in MADPO. A :class:`~comlrl.pbrl.reward_model.JointRewardModel`
    (``reward_model_name``, default: the agents' model) is trained on them with a Bradley-Terry
    loss; then ``rl_algorithm`` (magrpo, mareinforce, maremax, marloo, iac or maac) trains the
    agents for ``num_train_epochs`` epochs with the reward model as the reward. Evaluation always
    uses the task reward.
    """

    advantage_mode: str | None = None
    rl_algorithm: str = "magrpo"
    num_generations: int = 4
    reward_model_name: str | None = None
    reward_model_device: str | None = None
    reward_learning_rate: float = 1.0e-5
    reward_num_train_epochs: int = 1
    reward_train_batch_size: int = 1
    reward_max_length: int | None = None
    reward_freeze_backbone: bool = False
    critic_model_name: str | None = None
    critic_learning_rate: float | None = None
    critic_devices: Any = None
    use_separate_critic: bool = True
    critic_type: str = "v"
    value_loss_coef: float = 0.6
    value_clip_range: float | None = 0.2
    critic_value_head_hidden_dim: int | None = None
    value_head_hidden_dim: int | None = None

    accepts_reference_kl: ClassVar[bool] = True
    algorithm_label: ClassVar[str] = "MARLHF"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._validate_rlhf()

    def _validate_rlhf(self) -> None:
        self.rl_algorithm = normalize_choice(
            "rl_algorithm", self.rl_algorithm, tuple(RL_ALGORITHMS), RL_ALIASES
        )
        baseline = RL_ALGORITHMS[self.rl_algorithm]
        if baseline is None:
            check_int("num_generations", self.num_generations, 1)
            if self.advantage_mode is not None:
                raise ValueError(
                    f"advantage_mode does not apply to rl_algorithm={self.rl_algorithm!r} "
                    "(an actor-critic method); leave it None."
                )
        else:
            check_int("num_generations", self.num_generations, 2)
            if self.advantage_mode is None:
                self.advantage_mode = baseline
            elif self.advantage_mode != baseline:
                raise ValueError(
                    f"advantage_mode={self.advantage_mode!r} conflicts with "
                    f"rl_algorithm={self.rl_algorithm!r}, whose baseline is {baseline!r}; leave "
                    "advantage_mode None or pick the matching rl_algorithm."
                )
        _check_optional_str("reward_model_name", self.reward_model_name)
        if self.reward_model_device is not None:
            self.reward_model_device = str(self.reward_model_device)
            validate_device_spec(self.reward_model_device, "reward_model_device")
        check_number("reward_learning_rate", self.reward_learning_rate, 0.0, min_inclusive=False)
        check_int("reward_num_train_epochs", self.reward_num_train_epochs, 1)
        check_int("reward_train_batch_size", self.reward_train_batch_size, 1)
        check_optional_int("reward_max_length", self.reward_max_length, 1)
        check_bool("reward_freeze_backbone", self.reward_freeze_backbone)
        _check_optional_str("critic_model_name", self.critic_model_name)
        check_number(
            "critic_learning_rate",
            self.critic_learning_rate,
            0.0,
            min_inclusive=False,
            allow_none=True,
        )
        validate_device_spec(self.critic_devices, "critic_devices")
        check_bool("use_separate_critic", self.use_separate_critic)
        self.critic_type = normalize_choice("critic_type", self.critic_type, ("v", "q"))
        check_number("value_loss_coef", self.value_loss_coef, 0.0, min_inclusive=False)
        check_number(
            "value_clip_range", self.value_clip_range, 0.0, min_inclusive=False, allow_none=True
        )
        check_optional_int("critic_value_head_hidden_dim", self.critic_value_head_hidden_dim, 1)
        check_optional_int("value_head_hidden_dim", self.value_head_hidden_dim, 1)

    @property
    def uses_actor_critic(self) -> bool:
        """True when the RL phase is IAC or MAAC."""
        return RL_ALGORITHMS[self.rl_algorithm] is None
