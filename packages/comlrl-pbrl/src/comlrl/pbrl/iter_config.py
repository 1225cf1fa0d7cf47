"""Configuration of the iterative (online) preference trainers, MADPOIter and MARLHFIter.

Each iteration samples fresh candidates from the current policy (the *target*) and from a
*comparator* policy, ranks target-vs-comparator pairs by a scalar reward, optionally mixes in
pairs replayed from earlier iterations, and trains on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from comlrl.core.config.validation import (
    check_bool,
    check_int,
    check_number,
    check_optional_int,
    normalize_choice,
)
from comlrl.core.devices import validate_device_spec
from comlrl.pbrl.config import PAIR_SELECTIONS, MADPOConfig, MARLHFConfig

COMPARATOR_POLICIES = ("current", "current_copy", "model", "history", "api")
COMPARATOR_ALIASES = {
    "self": "current",
    "online": "current",
    "copy": "current_copy",
    "online_copy": "current_copy",
    "current-offload": "current_copy",
    "current_offload": "current_copy",
    "external": "model",
    "comparator": "model",
    "reference": "model",
    "ref": "model",
    "checkpoint": "history",
    "previous": "history",
    "previous_iteration": "history",
    "http": "api",
    "endpoint": "api",
}
GENERATION_MODES = ("decentralized", "centralized")
GENERATION_ALIASES = {
    "decentralised": "decentralized",
    "multi_agent": "decentralized",
    "multi-agent": "decentralized",
    "centralised": "centralized",
    "single_agent": "centralized",
    "single-agent": "centralized",
}
REPLAY_MODES = ("current", "nearest_k", "all_history", "lambda_decay")
REPLAY_ALIASES = {
    "latest": "current",
    "new": "current",
    "recent_k": "nearest_k",
    "last_k": "nearest_k",
    "k": "nearest_k",
    "lambda": "lambda_decay",
    "td_lambda": "lambda_decay",
    "td-lambda": "lambda_decay",
}
API_FORMATS = ("generic", "openai", "anthropic", "openai_responses")
API_FORMAT_ALIASES = {
    "openai_chat": "openai",
    "chat": "openai",
    "anthropic_messages": "anthropic",
    "messages": "anthropic",
    "responses": "openai_responses",
    "codex": "openai_responses",
}
COMPARATOR_PAIRINGS = ("aligned", "cross")
SCORING_REWARDS = ("task", "reward_model")
SCORING_ALIASES = {
    "oracle": "task",
    "environment": "task",
    "env": "task",
    "model": "reward_model",
    "learned": "reward_model",
}


def _optional_str(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string or None, got {value!r}.")


@dataclass
class _IterativePreferenceFields:
    """Fields shared by MADPOIterConfig and MARLHFIterConfig (validated by the subclasses)."""

    num_iterations: int = 6
    preference_replay_mode: str = "current"
    preference_replay_k: int | None = None
    preference_replay_lambda: float | None = None
    preference_replay_sample_size: int | None = None
    preference_replay_dir: str | None = None
    log_reward_distribution: bool = False
    policy_checkpoint_dir: str | None = None
    comparator_policy: str = "current"
    comparator_generation_mode: str = "decentralized"
    comparator_centralized_agent_index: int = 0
    comparator_model_name: str | None = None
    comparator_agents: Any = None
    comparator_devices: Any = None
    comparator_num_candidates: int | None = None
    comparator_history_k: int | None = None
    comparator_pairing: str = "aligned"
    comparator_api_url: str | None = None
    comparator_api_format: str = "generic"
    comparator_api_model: str | None = None
    comparator_api_max_n_per_request: int | None = None
    comparator_api_timeout: float = 120.0
    comparator_api_headers: dict | None = None
    comparator_api_key: str | None = None
    comparator_api_key_env: str | None = None
    comparator_api_key_header: str = "Authorization"
    comparator_api_key_prefix: str | None = "Bearer"
    comparator_api_response_field: str = "completions"
    comparator_api_extra_body: dict | None = None
    comparator_api_max_retries: int = 3
    comparator_api_retry_backoff: float = 1.0

    pair_selections: ClassVar[tuple[str, ...]] = (*PAIR_SELECTIONS, "comparator_reward")

    def _validate_iterative(self) -> None:
        check_int("num_iterations", self.num_iterations, 1)
        self._validate_replay()
        check_bool("log_reward_distribution", self.log_reward_distribution)
        _optional_str("preference_replay_dir", self.preference_replay_dir)
        _optional_str("policy_checkpoint_dir", self.policy_checkpoint_dir)
        self.comparator_policy = normalize_choice(
            "comparator_policy", self.comparator_policy, COMPARATOR_POLICIES, COMPARATOR_ALIASES
        )
        self.comparator_generation_mode = normalize_choice(
            "comparator_generation_mode",
            self.comparator_generation_mode,
            GENERATION_MODES,
            GENERATION_ALIASES,
        )
        if self.collaboration_mode == "centralized":
            # One joint actor: the comparator must write joint completions too.
            self.comparator_generation_mode = "centralized"
            check_int("comparator_centralized_agent_index", self.comparator_centralized_agent_index)
            if self.comparator_centralized_agent_index != 0:
                raise ValueError(
                    "comparator_centralized_agent_index must be 0 (the single actor index 0) in "
                    "centralized collaboration."
                )
        elif self.comparator_generation_mode == "centralized":
            check_int(
                "comparator_centralized_agent_index", self.comparator_centralized_agent_index, 0
            )
            if (
                self.num_agents is not None
                and self.comparator_centralized_agent_index >= self.num_agents
            ):
                raise ValueError(
                    f"comparator_centralized_agent_index must be < num_agents ({self.num_agents}), "
                    f"got {self.comparator_centralized_agent_index}."
                )
        check_optional_int("comparator_num_candidates", self.comparator_num_candidates, 1)
        self.comparator_pairing = normalize_choice(
            "comparator_pairing", self.comparator_pairing, COMPARATOR_PAIRINGS
        )
        self._validate_comparator_sources()
        self._validate_api()

    def _validate_replay(self) -> None:
        self.preference_replay_mode = normalize_choice(
            "preference_replay_mode", self.preference_replay_mode, REPLAY_MODES, REPLAY_ALIASES
        )
        mode = self.preference_replay_mode
        check_optional_int("preference_replay_k", self.preference_replay_k, 1)
        check_number(
            "preference_replay_lambda", self.preference_replay_lambda, 0.0, 1.0, allow_none=True
        )
        check_optional_int("preference_replay_sample_size", self.preference_replay_sample_size, 1)
        if mode == "current":
            if self.preference_replay_k not in (None, 1):
                raise ValueError(
                    "preference_replay_k must be None (or 1) with preference_replay_mode='current'."
                )
            if self.preference_replay_sample_size is not None:
                raise ValueError(
                    "preference_replay_sample_size must be None with "
                    "preference_replay_mode='current' (all current pairs are used)."
                )
        if mode == "nearest_k" and self.preference_replay_k is None:
            raise ValueError(
                "preference_replay_k is required (>= 1) with preference_replay_mode='nearest_k'."
            )
        if mode in ("all_history", "lambda_decay") and self.preference_replay_k is not None:
            raise ValueError(
                f"preference_replay_k must be None with preference_replay_mode='{mode}'."
            )
        if mode == "lambda_decay":
            if self.preference_replay_lambda is None:
                raise ValueError(
                    "preference_replay_lambda is required (in [0, 1]) with "
                    "preference_replay_mode='lambda_decay'."
                )
        elif self.preference_replay_lambda is not None:
            raise ValueError(
                "preference_replay_lambda is only used with preference_replay_mode='lambda_decay'."
            )

    def _validate_comparator_sources(self) -> None:
        policy = self.comparator_policy
        _optional_str("comparator_model_name", self.comparator_model_name)
        agents = self.comparator_agents
        if agents is not None and (
            isinstance(agents, (str, bytes)) or not hasattr(agents, "__len__") or len(agents) == 0
        ):
            raise ValueError(
                "comparator_agents must be a non-empty list of model names or model objects."
            )
        if self.comparator_devices is not None:
            validate_device_spec(self.comparator_devices, "comparator_devices")
        check_optional_int("comparator_history_k", self.comparator_history_k, 1)
        if policy == "model":
            if self.comparator_model_name is None and agents is None:
                raise ValueError(
                    "comparator_policy='model' needs comparator_model_name or comparator_agents."
                )
        elif self.comparator_model_name is not None or agents is not None:
            raise ValueError(
                f"comparator_model_name/comparator_agents are only used with "
                f"comparator_policy='model', not {policy!r}."
            )
        if policy == "history":
            if self.comparator_history_k is None:
                self.comparator_history_k = 1
        elif self.comparator_history_k is not None:
            raise ValueError(
                f"comparator_history_k is only used with comparator_policy='history', not "
                f"{policy!r}."
            )
        if policy == "api" and not self.comparator_api_url:
            raise ValueError("comparator_api_url is required with comparator_policy='api'.")

    def _validate_api(self) -> None:
        _optional_str("comparator_api_url", self.comparator_api_url)
        if self.comparator_api_url is not None and not self.comparator_api_url.startswith(
            ("http://", "https://")
        ):
            raise ValueError(
                f"comparator_api_url must start with http:// or https://, got "
                f"{self.comparator_api_url!r}."
            )
        self.comparator_api_format = normalize_choice(
            "comparator_api_format", self.comparator_api_format, API_FORMATS, API_FORMAT_ALIASES
        )
        _optional_str("comparator_api_model", self.comparator_api_model)
        check_optional_int(
            "comparator_api_max_n_per_request", self.comparator_api_max_n_per_request, 1
        )
        check_number(
            "comparator_api_timeout", self.comparator_api_timeout, 0.0, min_inclusive=False
        )
        for name in ("comparator_api_headers", "comparator_api_extra_body"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"{name} must be a mapping or None, got {type(value).__name__}.")
        if self.comparator_api_key is not None:
            raise ValueError(
                "comparator_api_key: keys are never stored in configs (they would end up in "
                "saved configs and logs); put the key in an environment variable and set "
                "comparator_api_key_env to its name."
            )
        _optional_str("comparator_api_key_env", self.comparator_api_key_env)
        if (
            not isinstance(self.comparator_api_key_header, str)
            or not self.comparator_api_key_header
        ):
            raise ValueError("comparator_api_key_header must be a non-empty header name.")
        _optional_str("comparator_api_key_prefix", self.comparator_api_key_prefix)
        if not isinstance(self.comparator_api_response_field, str) or not (
            self.comparator_api_response_field
        ):
            raise ValueError("comparator_api_response_field must be a non-empty (dotted) field.")
        check_int("comparator_api_max_retries", self.comparator_api_max_retries, 0)
        check_number("comparator_api_retry_backoff", self.comparator_api_retry_backoff, 0.0)
        if not math.isfinite(self.comparator_api_timeout):
            raise ValueError("comparator_api_timeout must be finite.")


@dataclass
class MADPOIterConfig(_IterativePreferenceFields, MADPOConfig):
    """MADPO repeated for ``num_iterations`` online iterations against a comparator policy."""

    num_train_epochs: int = 1
    preference_num_candidates: int = 20
    preference_pairs_per_sample: int | None = 4
    pair_selection: str = "comparator_reward"

    pair_selections: ClassVar[tuple[str, ...]] = _IterativePreferenceFields.pair_selections
    algorithm_label: ClassVar[str] = "MADPOIter"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._validate_iterative()


@dataclass
class MARLHFIterConfig(_IterativePreferenceFields, MARLHFConfig):
    """MARLHF repeated for ``num_iterations`` online iterations against a comparator policy.

    ``preference_scoring_reward`` ranks each iteration's pairs with the task reward ("task") or,
    from the second iteration on, with the previous iteration's reward model ("reward_model").
    ``reward_model_warm_start`` keeps training the same reward model across iterations instead
    of restarting it from its initial weights (the CoMLRL behaviour).
    """

    num_train_epochs: int = 2
    preference_num_candidates: int = 20
    preference_pairs_per_sample: int | None = 4
    pair_selection: str = "comparator_reward"
    reward_num_train_epochs: int = 2
    preference_scoring_reward: str = "task"
    reward_model_warm_start: bool = False

    pair_selections: ClassVar[tuple[str, ...]] = _IterativePreferenceFields.pair_selections
    algorithm_label: ClassVar[str] = "MARLHFIter"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.preference_scoring_reward = normalize_choice(
            "preference_scoring_reward",
            self.preference_scoring_reward,
            SCORING_REWARDS,
            SCORING_ALIASES,
        )
        check_bool("reward_model_warm_start", self.reward_model_warm_start)
        self._validate_iterative()
