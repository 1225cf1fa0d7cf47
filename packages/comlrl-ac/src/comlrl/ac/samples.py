"""What the actor-critic family hands out per sample: the ``metrics_callback``'s view of each
completion (CoMLRL 1.4.3's ``RolloutSample``), MAAC's joint samples, and the trainer inputs.

The family trains on core's rollout record (:class:`comlrl.core.rollout.record.ValueGroup`);
a ``RolloutSample`` is built from a tree node and its groups only when a callback asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.core.inputs import TrainerInputs
from comlrl.core.rollout.record import ValueGroup
from comlrl.core.rollout.tree import TreeNode


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
    step: int = 0
    reference_kl: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Per-token log-probs of the completion under the rollout policy (`policy_loss="ppo"`).
    old_logps: list[float] | None = None

    @property
    def shaped_reward(self) -> float:
        """The reward after the reference-KL penalty (the reward itself when KL is off)."""
        return float(self.metadata.get("shaped_reward", self.reward))


def sample_views(
    nodes: Sequence[TreeNode], per_agent: Sequence[Sequence[ValueGroup]] | None = None
) -> list[RolloutSample]:
    """The samples of ``nodes`` (one item's tree) as ``metrics_callback`` gets them: agent by
    agent, then node by node, then joint action by joint action.

    ``per_agent[i][j]`` is agent ``i``'s group at ``nodes[j]``; it supplies the critic's fields,
    the KL and the returns. Without it (evaluation: no critic, no KL) the returns are the
    tree's own."""
    out = []
    agents = len(nodes[0].samples) if nodes else 0
    for i in range(agents):
        for j, node in enumerate(nodes):
            group = per_agent[i][j] if per_agent is not None else None
            for a, action in enumerate(node.joint_actions):
                out.append(_view(node, a, i, action[i], group))
    return out


def _view(node: TreeNode, action: int, agent: int, k: int, group: ValueGroup | None):
    ps = node.samples[agent]
    reward = float(node.reward_of(action, agent))
    metadata: dict[str, Any] = {"turn_idx": node.turn, "generation_idx": k, "batch_item": node.item}
    if node.per_agent:
        # the joint action's shared (mean) reward, for the logged turn reward_mean
        metadata["joint_reward"] = float(node.rewards[action])
    sample = RolloutSample(
        agent_idx=agent,
        prompt=node.prompts[agent],
        completion=ps.texts[k],
        prompt_ids=list(ps.prompt_ids),
        completion_ids=list(ps.completion_ids[k]),
        reward=reward,
        returns=float(node.return_of(action, agent)),
        advantage=None,
        old_value=None,
        value_target=None,
        turn_idx=node.turn,
        generation_idx=k,
        step=node.step,
        metadata=metadata,
    )
    if group is None:
        return sample
    sample.returns = group.returns[k]
    sample.advantage = group.advantages[k]
    sample.old_value = group.values[k]
    sample.value_target = metadata["value_target"] = group.targets[k]
    if group.kls:
        sample.reference_kl = group.kls[k]
        metadata.update(
            reference_kl=group.kls[k],
            reference_kl_penalty=node.penalties[action][agent],
            environment_reward=reward,
            shaped_reward=group.rewards[k],
        )
    if group.old_logps:
        sample.old_logps = group.old_logps[k]
    return sample


@dataclass
class JointSample:
    """One joint action as MAAC's centralized critic sees it: the joint text's token ids, the
    critic's estimate at rollout and its TD(0) target (the λ-return with ``gae_lambda`` > 0)."""

    turn_idx: int
    input_ids: list[int]
    old_value: float
    target: float
    step: int = 0

    def to_state(self) -> dict[str, Any]:
        """Plain data for checkpoints."""
        return dict(self.__dict__)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> JointSample:
        """Inverse of :meth:`to_state`."""
        return cls(**state)


@dataclass
class ActorCriticInputs(TrainerInputs):
    """The trainer inputs plus the critics and the per-episode metrics callback."""

    critic_model: Any = None
    critics: Any = None
    metrics_callback: Any = None
