"""Buffered training samples of the actor-critic family."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from comlrl.core.inputs import TrainerInputs

# Metadata keys that hold user objects (dataset rows); they are for callbacks, not checkpoints.
_TRANSIENT_METADATA = ("batch_item",)


@dataclass
class RolloutSample:
    """One agent's completion at one turn of one episode, with its critic bookkeeping.

    ``reward`` is the environment's reward for this agent (the joint reward, or the agent's
    own value when the reward function gives one per agent; ``metadata["joint_reward"]`` then
    holds the joint action's mean); ``returns`` the undiscounted reward-to-go
    after KL shaping (logged as ``expected_return``; ``discount`` enters only the TD target);
    ``old_value`` the critic's estimate at rollout; ``value_target`` the TD(0) target
    ``r + γ·V(h')`` (``r`` at the last turn), or the λ-return with ``gae_lambda`` > 0;
    ``advantage`` is ``value_target - old_value`` before normalization; ``old_logps`` the
    completion's per-token log-probs at rollout (only with ``policy_loss="ppo"``). Eval samples
    carry None in the critic fields.
    """

    agent_idx: int
    prompt: str
    completion: str
    prompt_ids: list[int]
    completion_ids: list[int]
    reward: float
    returns: float
    advantage: float | None
    old_value: float | None
    value_target: float | None
    turn_idx: int
    generation_idx: int = 0
    env_step: int = 0
    reference_kl: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Per-token log-probs of the completion under the rollout policy (`policy_loss="ppo"`).
    old_logps: list[float] | None = None

    @property
    def shaped_reward(self) -> float:
        """The reward after the reference-KL penalty (the reward itself when KL is off)."""
        return float(self.metadata.get("shaped_reward", self.reward))

    def to_state(self) -> dict[str, Any]:
        """Plain data for checkpoints (dataset rows in ``metadata`` are left out)."""
        state = dict(self.__dict__)
        state["metadata"] = {k: v for k, v in self.metadata.items() if k not in _TRANSIENT_METADATA}
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RolloutSample:
        """Inverse of :meth:`to_state`."""
        return cls(**state)


@dataclass
class JointSample:
    """One joint action as MAAC's centralized critic sees it: the joint text's token ids, the
    critic's estimate at rollout and its TD(0) target (the λ-return with ``gae_lambda`` > 0)."""

    turn_idx: int
    input_ids: list[int]
    old_value: float
    target: float
    env_step: int = 0

    def to_state(self) -> dict[str, Any]:
        """Plain data for checkpoints."""
        return dict(self.__dict__)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> JointSample:
        """Inverse of :meth:`to_state`."""
        return cls(**state)


@dataclass
class Episode:
    """Everything one dataset item produced: each agent's samples in env order, and (MAAC) the
    joint samples of the centralized critic."""

    samples: list[list[RolloutSample]]
    joint: list[JointSample] = field(default_factory=list)
    env_step: int = 0


@dataclass
class ActorCriticInputs(TrainerInputs):
    """The trainer inputs plus the critics and the per-episode metrics callback."""

    critic_model: Any = None
    critics: Any = None
    metrics_callback: Any = None
