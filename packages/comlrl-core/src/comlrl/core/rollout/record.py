"""The rollout record: what a policy-gradient update trains on, built by core from the trees.

A :class:`RolloutGroup` is one agent's K completions at one tree node, the group an advantage
is computed over: its prompt and completion token ids, the agent's (shaped) reward and return
of each completion, their advantages once the family has computed them, the rollout's and the
reference's per-token log-probs where the loss uses them, and the node's turn and env step.

Returns come from the tree's one recursion after every reward transform
(:mod:`comlrl.core.rewards.shaping`), so a group's returns already carry the KL penalty when KL
is in the reward. Credit in ``cross`` mode, where a completion is part of several joint actions,
is the mean over those actions (:func:`comlrl.core.rollout.tree.agent_returns`); the group also
keeps the node's whole joint table from the agent's side (``joint_returns``, ``joint_index``),
which counterfactual credit reads.

A :class:`ValueGroup` is the same group with a critic's bookkeeping per completion (the
actor-critic family): the critic's estimate at rollout and the target it regresses to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from comlrl.core.logprobs import token_logprobs
from comlrl.core.models.reference import reference_token_logps
from comlrl.core.rewards.reward_metrics import node_agent_reward_mean
from comlrl.core.rollout.tree import TreeNode, agent_returns
from comlrl.core.training.dropout import dropout_off
from comlrl.core.training.precision import scoring_context

if TYPE_CHECKING:
    from comlrl.core.trainer import TrainerBase


@dataclass
class RolloutGroup:
    """One agent's K completions at one tree node, with their credit.

    ``rewards[k]``/``returns[k]`` are completion k's immediate reward and return for this agent,
    shaped; ``advantages[k]`` its advantage within the group (set by the family's ``collect``;
    normalization over a whole update batch comes later). ``kls[k]`` is the reward-side KL
    that shaping took (empty without it), ``old_logps[k]``/``ref_logps[k]`` the per-token
    log-probs at rollout and under the reference (empty unless the loss uses them).
    ``baseline`` is a baseline measured outside the group (ReMax's greedy reward), and
    ``node_reward``/``node_return``/``own_reward`` the node's environment values for logging.
    ``joint_returns[a]`` is the agent's (shaped) return of the node's joint action ``a`` and
    ``joint_index[a]`` which of the K completions the agent contributed to it: the node's joint
    table (K entries when aligned, K^N when crossed; empty in buffers of older checkpoints).
    """

    agent: int
    turn: int
    step: int
    prompt_ids: list[int]
    completion_ids: list[list[int]]
    returns: list[float]
    rewards: list[float] = field(default_factory=list)
    advantages: list[float] = field(default_factory=list)
    kls: list[float] = field(default_factory=list)
    old_logps: list[list[float]] = field(default_factory=list)
    ref_logps: list[list[float]] = field(default_factory=list)
    baseline: float | None = None
    node_reward: float = 0.0
    node_return: float = 0.0
    own_reward: float | None = None
    joint_returns: list[float] = field(default_factory=list)
    joint_index: list[int] = field(default_factory=list)

    @property
    def size(self) -> int:
        """K, the number of completions in the group."""
        return len(self.completion_ids)

    def to_state(self) -> dict[str, Any]:
        """Plain data for checkpoints."""
        return dict(self.__dict__)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RolloutGroup:
        """Inverse of :meth:`to_state`."""
        return cls(**state)


@dataclass
class ValueGroup(RolloutGroup):
    """A :class:`RolloutGroup` with a critic: ``values[k]`` is the critic's estimate for
    completion k at rollout and ``targets[k]`` the target it regresses to (a TD or λ-return
    target, computed by the family from the group's shaped rewards); ``advantages`` are then
    the critic's."""

    values: list[float] = field(default_factory=list)
    targets: list[float] = field(default_factory=list)


def rollout_groups(
    nodes: Sequence[TreeNode],
    agent: int,
    kls: Sequence[Sequence[float]] | None = None,
    group_cls: type[RolloutGroup] = RolloutGroup,
) -> list[RolloutGroup]:
    """``agent``'s group at each of ``nodes``, from the tree's (shaped) rewards and returns;
    ``kls[j]`` is the shaping KL of the agent's completions at ``nodes[j]``. ``group_cls``
    builds them (:class:`ValueGroup` for a family with a critic)."""
    groups = []
    for j, node in enumerate(nodes):
        ps = node.samples[agent]
        groups.append(
            group_cls(
                agent=agent,
                turn=node.turn,
                step=node.step,
                prompt_ids=list(ps.prompt_ids),
                completion_ids=[list(c) for c in ps.completion_ids],
                returns=agent_returns(node, agent),
                rewards=_completion_rewards(node, agent),
                kls=list(kls[j]) if kls is not None else [],
                node_reward=float(np.mean(node.rewards)),
                node_return=float(np.mean(node.returns)),
                own_reward=node_agent_reward_mean(node, agent),
                joint_returns=[node.return_of(a, agent) for a in range(len(node.joint_actions))],
                joint_index=[action[agent] for action in node.joint_actions],
            )
        )
    return groups


def _completion_rewards(node: TreeNode, agent: int) -> list[float]:
    k = len(node.samples[agent].completion_ids)
    totals, counts = [0.0] * k, [0] * k
    for a, action in enumerate(node.joint_actions):
        totals[action[agent]] += node.shaped_reward_of(a, agent)
        counts[action[agent]] += 1
    return [t / c if c else 0.0 for t, c in zip(totals, counts)]


def attach_logprobs(
    trainer: TrainerBase,
    per_agent: Sequence[Sequence[RolloutGroup]],
    *,
    old: bool,
    reference: bool,
    layout: str = "auto",
) -> None:
    """Fill the groups' ``old_logps`` (the rollout policy, without dropout) and ``ref_logps``
    (the agent's reference), each agent's completions scored together at the sampler's
    temperature, within the token budget, in the update's precision (under ``bf16=True`` the
    same autocast as the update's forwards, so old and new log-probs meet in one precision).
    ``layout`` plans the rollout policy's forwards
    (see :func:`~comlrl.core.logprobs.planning.plan`): a family whose update scores in one
    layout takes the rollout's in the same one, so a first pass's ratios are 1 to the bit
    (``"auto"`` keeps the engine's choice and its dedupe of repeated rows)."""
    a = trainer.args
    pads = [tok.pad_token_id for tok in trainer.tokenizers]
    if reference:

        def reference_scores(i, p, c):
            ref = trainer.reference_models[i]
            with scoring_context(a, ref):
                return reference_token_logps(
                    ref, p, c, pads[i], a.logprob_max_tokens, a.temperature
                )

        _per_completion(trainer.workers, per_agent, "ref_logps", reference_scores)
    if old:

        def rollout_policy(i, p, c):
            with dropout_off(trainer.agents[i]), scoring_context(a, trainer.agents[i]):
                lp = token_logprobs(
                    trainer.agents[i],
                    p,
                    c,
                    pad_id=pads[i],
                    max_tokens=a.logprob_max_tokens,
                    temperature=a.temperature,
                    dedupe=layout == "auto",
                    layout=layout,
                )
            return [v[: len(x)] for v, x in zip(lp.values.tolist(), c)]

        _per_completion(trainer.workers, per_agent, "old_logps", rollout_policy)


def _per_completion(
    workers: Any,
    per_agent: Sequence[Sequence[RolloutGroup]],
    attr: str,
    compute: Callable[[int, list, list], list],
) -> None:
    """``compute(agent, prompts, completions)`` over all of an agent's completions at once,
    on the agent's worker (agents on different devices at once), split back into each
    group's ``attr`` (one entry per completion)."""

    def run(i: int, groups) -> list:
        prompts = [g.prompt_ids for g in groups for _ in g.completion_ids]
        return compute(i, prompts, [c for g in groups for c in g.completion_ids])

    for groups, values in zip(per_agent, workers.map(run, per_agent)):
        pos = 0
        for g in groups:
            setattr(g, attr, values[pos : pos + g.size])
            pos += g.size
