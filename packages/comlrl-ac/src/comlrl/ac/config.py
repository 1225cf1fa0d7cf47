"""Configuration of the actor-critic family (IAC and MAAC).

Field names and defaults follow CoMLRL 1.4.3, except where noted on the field: we validate every
field, ``num_agents`` defaults to None (taken from the trainer's agents), multi-turn episodes run
to ``num_turns`` unless an ``early_termination_threshold`` is set, and ``value_clip_range`` applies
to every kind of critic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from comlrl.core import algos
from comlrl.core.config.base import POSITIVE, CommonConfig
from comlrl.core.config.fields import (
    Choice,
    FallsBackTo,
    Integer,
    Noted,
    Number,
    Registered,
    knob,
)
from comlrl.core.config.knobs import (
    CLIP_RATIO_C,
    CRITIC_DEVICES,
    CRITIC_LEARNING_RATE,
    CRITIC_TYPE,
    CRITIC_TYPES,
    CRITIC_VALUE_HEAD_HIDDEN_DIM,
    NUM_GENERATIONS,
    TRL_LOSS_TYPES,
    USE_SEPARATE_CRITIC,
    VALUE_CLIP_RANGE,
    VALUE_HEAD_HIDDEN_DIM,
    VALUE_LOSS_COEF,
)
from comlrl.core.placement.devices import validate_device_spec

__all__ = [
    "ACTOR_AGGREGATIONS",
    "CRITIC_TYPES",
    "ActorCriticConfig",
    "IACConfig",
    "MAACConfig",
]

# How the actor's token log-probs make the mini-batch loss (see ActorCriticConfig).
ACTOR_AGGREGATIONS = ("sum", "sequence_mean", "token_mean")
# Other spellings of the same choices: `none`, and TRL's `loss_type` names of these three.
ACTOR_AGGREGATION_SPELLINGS = {
    "none": "sum",
    **{k: v for k, v in TRL_LOSS_TYPES.items() if v in ACTOR_AGGREGATIONS},
}
_DEFAULT_EPSILON = 0.2
_DEFAULT_CLIP_RATIO_C = 3.0


@dataclass
class ActorCriticConfig(CommonConfig):
    """Settings shared by IAC and MAAC. Use :class:`IACConfig` or :class:`MAACConfig`."""

    num_train_epochs: int = 40
    logging_steps: int = 1
    top_k: int | None = None
    rollout_buffer_size: int = 8
    num_generations: int = NUM_GENERATIONS(1, check=Noted(Integer(1), "1 when `num_turns` > 1"))
    critic_learning_rate: float | None = CRITIC_LEARNING_RATE(
        5.0e-6, check=FallsBackTo("agent_learning_rate", POSITIVE)
    )
    critic_type: str = CRITIC_TYPE("v")
    critic_devices: Any = CRITIC_DEVICES(None)
    value_loss_coef: float = VALUE_LOSS_COEF(0.6)
    value_clip_range: float | None = VALUE_CLIP_RANGE(0.2)
    critic_value_head_hidden_dim: int | None = CRITIC_VALUE_HEAD_HIDDEN_DIM(None)
    gae_lambda: float = knob(
        0.0,
        help="λ of the GAE(λ) advantage along each agent's trajectory, A_t = Σ_l (γλ)^l δ_{t+l}; "
        "the critic's target is the λ-return A_t + V(h_t). 0: the TD(0) error "
        "r_t + γ·V(h_{t+1}) - V(h_t) (as in 1.4.3); 1: the Monte-Carlo return minus V(h_t).",
        check=Number(0.0, 1.0),
    )
    policy_loss: str = knob(
        "reinforce",
        help="The actor's loss, a registered policy loss (comlrl.core.algos."
        "register_policy_loss): `reinforce` weights each completion's summed log-probability "
        "by its advantage (on-policy, as in 1.4.3); `ppo` clips a per-token ratio to the "
        "rollout policy's log-probs (IAC becomes IPPO, MAAC becomes MAPPO) and logs "
        "`agent_{i}/clip_fraction` and `agent_{i}/approx_kl`; `gspo` clips one ratio per "
        "completion; or a loss registered by name.",
        check=Registered("policy_loss"),
    )
    num_iterations: int = knob(
        1,
        help="Passes over each drained buffer: every pass reshuffles and takes one actor step "
        "(and one critic step) per mini-batch, with the advantages and value targets computed "
        "once at rollout. More than 1 needs `policy_loss` `ppo`, whose ratio corrects for the "
        "policy having moved since the rollout.",
        check=Integer(1),
    )
    epsilon: float = knob(
        _DEFAULT_EPSILON,
        help="Clip range of the `ppo` actor loss: each token's ratio is kept within "
        "[1 − epsilon, 1 + epsilon_high].",
        check=Number(0.0, 1.0, min_inclusive=False, max_inclusive=False),
    )
    epsilon_high: float | None = knob(
        None,
        help="Upper clip range of the `ppo` actor loss (clip-higher, as in DAPO); None uses "
        "`epsilon`.",
        check=Number(0.0, min_inclusive=False, optional=True),
    )
    clip_ratio_c: float | None = CLIP_RATIO_C(_DEFAULT_CLIP_RATIO_C)
    loss_aggregation: str = knob(
        "sum",
        help="How the actor's token log-probs make the mini-batch loss: `sum` sums each "
        "completion's tokens and averages over completions (as in 1.4.3); `sequence_mean` "
        "averages each completion's tokens first; `token_mean` weighs every token of the "
        "mini-batch equally (as verl's and OpenRLHF's PPO), pooled over ranks. Applies to both "
        "actor losses. TRL's `loss_type` names are accepted as values: `grpo` = "
        "`sequence_mean`, `bnpo` and `dapo` = `token_mean`.",
        check=Choice(ACTOR_AGGREGATIONS, ACTOR_AGGREGATION_SPELLINGS),
    )

    _family = "Actor-critic"

    def _check_relations(self) -> None:
        super()._check_relations()
        if self.num_turns > 1 and self.num_generations != 1:
            raise ValueError(
                f"num_generations must be 1 when num_turns > 1: multi-turn {self._family} "
                f"follows one trajectory per item (got num_generations={self.num_generations}, "
                f"num_turns={self.num_turns})."
            )
        self._check_critic_devices()
        self._check_actor_loss()

    def _check_actor_loss(self) -> None:
        """Reusing a rollout or setting a clip range needs a ratio loss (one that reads the
        rollout's log-probs)."""
        if algos.get("policy_loss", self.policy_loss, "policy_loss").needs_old_logps:
            return
        fix = "set policy_loss='ppo' (or another ratio loss) for clipped updates"
        if self.num_iterations > 1:
            raise ValueError(
                f"num_iterations={self.num_iterations} reuses each rollout, but "
                f"policy_loss={self.policy_loss!r} forms no ratio to correct for the policy's "
                f"change; {fix}, or num_iterations=1."
            )
        if self.epsilon != _DEFAULT_EPSILON or self.epsilon_high is not None:
            raise ValueError(
                f"epsilon={self.epsilon} / epsilon_high={self.epsilon_high} have no effect: "
                f"policy_loss={self.policy_loss!r} clips nothing; {fix}."
            )
        if self.clip_ratio_c != _DEFAULT_CLIP_RATIO_C:
            raise ValueError(
                f"clip_ratio_c={self.clip_ratio_c} has no effect: policy_loss="
                f"{self.policy_loss!r} forms no ratio; {fix}."
            )

    def _check_critic_devices(self) -> None:
        """Family-specific rules for ``critic_devices``."""

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

    use_separate_critic: bool = USE_SEPARATE_CRITIC(True)
    value_head_hidden_dim: int | None = VALUE_HEAD_HIDDEN_DIM(None)

    _family = "IAC"

    def _check_relations(self) -> None:
        super()._check_relations()
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

    def _check_critic_devices(self) -> None:
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

    def _check_critic_devices(self) -> None:
        if self.parallel_training == "mp" and self.critic_devices is None:
            raise ValueError("parallel_training='mp' requires critic_devices for MAAC's critic.")
        if self.critic_devices is not None:
            if isinstance(self.critic_devices, (list, tuple)) and len(self.critic_devices) != 1:
                raise ValueError(
                    f"critic_devices: MAAC has one critic; give one device, got "
                    f"{self.critic_devices!r}."
                )
            validate_device_spec(self.critic_devices, "critic_devices", 1)
