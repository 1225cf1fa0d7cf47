"""Configuration of the iterative (online) preference trainers, MADPOIter and MARLHFIter.

Each iteration samples fresh candidates from the current policy (the *target*) and from a
*comparator* policy, ranks target-vs-comparator pairs by a scalar reward, optionally mixes in
pairs replayed from earlier iterations, and trains on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from comlrl.core.config.fields import (
    Boolean,
    Choice,
    Custom,
    Devices,
    Integer,
    Mapping,
    Number,
    Text,
    knob,
)
from comlrl.pbrl.config import (
    COLLABORATION_ALIASES,
    COLLABORATION_MODES,
    NAME,
    PAIR_SELECTIONS,
    MADPOConfig,
    MARLHFConfig,
)

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
# A comparator generates in either collaboration mode.
GENERATION_MODES = COLLABORATION_MODES
GENERATION_ALIASES = COLLABORATION_ALIASES
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


def _comparator_agents(name: str, value: Any) -> Any:
    if value is not None and (
        isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) == 0
    ):
        raise ValueError(f"{name} must be a non-empty list of model names or model objects.")
    return value


def _api_url(name: str, value: Any) -> str | None:
    NAME(name, value, None)
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValueError(f"{name} must start with http:// or https://, got {value!r}.")
    return value


def _no_literal_key(name: str, value: Any) -> None:
    if value is not None:
        raise ValueError(
            f"{name}: keys are never stored in configs (they would end up in saved configs and "
            "logs); put the key in an environment variable and set comparator_api_key_env to "
            "its name."
        )
    return None


ONLINE_ITERATIONS_DEFAULT = 6


@dataclass
class _IterativePreferenceFields:
    """Fields shared by MADPOIterConfig and MARLHFIterConfig (checked by CommonConfig)."""

    epochs_per_iteration: ClassVar[bool] = True

    num_online_iterations: int = knob(
        ONLINE_ITERATIONS_DEFAULT,
        help="Online iterations: sample against the comparator, then train (each iteration runs "
        "`num_train_epochs` epochs over its pairs).",
        check=Integer(1),
    )
    num_iterations: int = knob(
        ONLINE_ITERATIONS_DEFAULT,
        help="The reference's name of `num_online_iterations`, kept as an alias and always equal "
        "to it (set either; both set to different values raises). Not the RL algorithm's "
        "`num_iterations` (PPO passes per rollout), which MARLHFIter takes in its `rl:` section.",
        check=Integer(1),
    )
    preference_replay_mode: str = knob(
        "current",
        help="Which pairs an iteration trains on: `current` its own, `nearest_k` those of the "
        "last `preference_replay_k` iterations, `all_history` every iteration's, "
        "`lambda_decay` iterations weighted (1-λ)λ^age.",
        check=Choice(REPLAY_MODES, REPLAY_ALIASES),
    )
    preference_replay_k: int | None = knob(
        None,
        help="Iterations `nearest_k` replay draws from (required there).",
        check=Integer(1, optional=True),
    )
    preference_replay_lambda: float | None = knob(
        None,
        help="λ of `lambda_decay` replay (required there); 1 weighs every iteration equally.",
        check=Number(0.0, 1.0, optional=True),
    )
    preference_replay_sample_size: int | None = knob(
        None,
        help="Pairs drawn from the replay store; None: as many as this iteration made.",
        check=Integer(1, optional=True),
    )
    preference_replay_dir: str | None = knob(
        None,
        help="Where replay shards are written; None: `<run>/preference_replay` when replay is on.",
        check=NAME,
    )
    log_reward_distribution: bool = knob(
        False,
        help="Write and log each iteration's reward histograms (the task reward must declare "
        "its `reward_range`).",
        check=Boolean(),
    )
    policy_checkpoint_dir: str | None = knob(
        None,
        help="Where `history` comparators' policy snapshots live; None: "
        "`<run>/policy_checkpoints`.",
        check=NAME,
    )
    comparator_policy: str = knob(
        "current",
        help="Who the agents are compared with: `current` themselves, `current_copy` a frozen "
        "copy, `history` an earlier iteration, `model` external models, `api` an HTTP endpoint.",
        check=Choice(COMPARATOR_POLICIES, COMPARATOR_ALIASES),
    )
    comparator_generation_mode: str = knob(
        "decentralized",
        help="`centralized`: one writer produces every role in one tagged completion; forced in "
        "centralized collaboration.",
        check=Choice(GENERATION_MODES, GENERATION_ALIASES),
    )
    comparator_centralized_agent_index: int = knob(
        0,
        help="Which agent writes for a centralized comparator (0 in centralized collaboration).",
        check=Integer(0),
    )
    comparator_model_name: str | None = knob(
        None, help="The `model` comparator: one model for every role.", check=NAME
    )
    comparator_agents: Any = knob(
        None,
        help="The `model` comparator: a list of model names or objects, 1 or one per agent.",
        check=Custom(_comparator_agents, "None or a non-empty list"),
    )
    comparator_devices: Any = knob(
        None, help="Where local comparator models live.", check=Devices()
    )
    comparator_num_candidates: int | None = knob(
        None,
        help="Candidates the comparator samples per item; None: `preference_num_candidates`.",
        check=Integer(1, optional=True),
    )
    comparator_history_k: int | None = knob(
        None,
        help="The `history` comparator is the policy of this many iterations ago (None: 1).",
        check=Integer(1, optional=True),
    )
    comparator_pairing: str = knob(
        "aligned",
        help="`aligned` pairs target and comparator candidates by index; `cross` tries all N×M.",
        check=Choice(COMPARATOR_PAIRINGS),
    )
    comparator_api_url: str | None = knob(
        None,
        help="Endpoint of the `api` comparator (http:// or https://).",
        check=Custom(_api_url, "None or an http(s) URL"),
    )
    comparator_api_format: str = knob(
        "generic",
        help="Request layout of the `api` comparator: `generic`, `openai` (chat completions), "
        "`anthropic` (messages) or `openai_responses`.",
        check=Choice(API_FORMATS, API_FORMAT_ALIASES),
    )
    comparator_api_model: str | None = knob(None, help="Model name sent to the API.", check=NAME)
    comparator_api_max_n_per_request: int | None = knob(
        None,
        help="Most completions asked for in one API request; None: all at once.",
        check=Integer(1, optional=True),
    )
    comparator_api_timeout: float = knob(
        120.0,
        help="Seconds before an API request times out (and is retried).",
        check=Number(0.0, min_inclusive=False),
    )
    comparator_api_headers: dict | None = knob(
        None, help="Extra HTTP headers of every API request.", check=Mapping()
    )
    comparator_api_key: str | None = knob(
        None,
        help="Refused when set: keys never go in configs; use `comparator_api_key_env`.",
        check=Custom(_no_literal_key, "None"),
    )
    comparator_api_key_env: str | None = knob(
        None, help="Environment variable that holds the API key.", check=NAME
    )
    comparator_api_key_header: str = knob(
        "Authorization",
        help="HTTP header that carries the key.",
        check=Text("a non-empty header name", optional=False, nonempty=True),
    )
    comparator_api_key_prefix: str | None = knob(
        "Bearer", help="Text put before the key in its header; None: the bare key.", check=NAME
    )
    comparator_api_response_field: str = knob(
        "completions",
        help="Dotted path of the completions in a `generic` API response.",
        check=Text("a non-empty (dotted) field", optional=False, nonempty=True),
    )
    comparator_api_extra_body: dict | None = knob(
        None, help="Extra fields merged into every API request body.", check=Mapping()
    )
    comparator_api_max_retries: int = knob(
        3, help="Retries of a failed API request (timeouts, 408/425/429/5xx).", check=Integer(0)
    )
    comparator_api_retry_backoff: float = knob(
        1.0,
        help="Seconds before the first retry; doubled after each one.",
        check=Number(0.0),
    )

    pair_selections: ClassVar[tuple[str, ...]] = (*PAIR_SELECTIONS, "comparator_reward")

    def _check_relations(self) -> None:
        super()._check_relations()
        self._fold_iteration_alias()
        self._check_replay()
        if self.collaboration_mode == "centralized":
            # One joint actor: the comparator must write joint completions too.
            self.comparator_generation_mode = "centralized"
            if self.comparator_centralized_agent_index != 0:
                raise ValueError(
                    "comparator_centralized_agent_index must be 0 (the single actor index 0) in "
                    "centralized collaboration."
                )
        elif (
            self.comparator_generation_mode == "centralized"
            and self.num_agents is not None
            and self.comparator_centralized_agent_index >= self.num_agents
        ):
            raise ValueError(
                f"comparator_centralized_agent_index must be < num_agents ({self.num_agents}), "
                f"got {self.comparator_centralized_agent_index}."
            )
        self._check_comparator_sources()

    def _fold_iteration_alias(self) -> None:
        # Whichever name moved off the default is the setting; both moved must agree.
        default = ONLINE_ITERATIONS_DEFAULT
        alias, canonical = self.num_iterations, self.num_online_iterations
        if alias != default and canonical != default and alias != canonical:
            raise ValueError(
                f"num_iterations={alias} and num_online_iterations={canonical} disagree; "
                "num_iterations is the earlier name of num_online_iterations: set only "
                "num_online_iterations."
            )
        value = canonical if canonical != default else alias
        self.num_online_iterations = self.num_iterations = value

    def _check_replay(self) -> None:
        mode = self.preference_replay_mode
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

    def _check_comparator_sources(self) -> None:
        policy = self.comparator_policy
        if policy == "model":
            if self.comparator_model_name is None and self.comparator_agents is None:
                raise ValueError(
                    "comparator_policy='model' needs comparator_model_name or comparator_agents."
                )
        elif self.comparator_model_name is not None or self.comparator_agents is not None:
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


@dataclass
class MADPOIterConfig(_IterativePreferenceFields, MADPOConfig):
    """MADPO repeated for ``num_online_iterations`` online iterations against a comparator policy."""

    num_train_epochs: int = 1
    preference_num_candidates: int = 20
    preference_pairs_per_sample: int | None = 4
    pair_selection: str = "comparator_reward"

    pair_selections: ClassVar[tuple[str, ...]] = _IterativePreferenceFields.pair_selections
    algorithm_label: ClassVar[str] = "MADPOIter"


@dataclass
class MARLHFIterConfig(_IterativePreferenceFields, MARLHFConfig):
    """MARLHF repeated for ``num_online_iterations`` online iterations against a comparator policy.

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
    preference_scoring_reward: str = knob(
        "task",
        help="What ranks each iteration's pairs: the `task` reward, or (from the second "
        "iteration on) the previous iteration's `reward_model`.",
        check=Choice(SCORING_REWARDS, SCORING_ALIASES),
    )
    reward_model_warm_start: bool = knob(
        False,
        help="Keep training one reward model across iterations instead of restarting it from "
        "its initial weights.",
        check=Boolean(),
    )

    pair_selections: ClassVar[tuple[str, ...]] = _IterativePreferenceFields.pair_selections
    algorithm_label: ClassVar[str] = "MARLHFIter"
