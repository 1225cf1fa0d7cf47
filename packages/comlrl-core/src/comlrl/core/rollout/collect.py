"""The collect half of a policy family's step, owned by core: one unit's rollout trees become
the rollout record, each agent's :class:`~comlrl.core.rollout.record.RolloutGroup` per node.

In order: the training rollout (:func:`~comlrl.core.rollout.rollouts.unit_trees`), an optional look at the raw
trees (MAReMax measures its greedy baselines there, before any shaping), KL shaping as a
reward transform with the tree's one return recursion (:mod:`comlrl.core.rewards.shaping`),
the record, and the rollout policy's and the reference's per-token log-probs where the loss
needs them. A family's ``collect`` is this call, its math on the record (advantages, or a
critic's values and targets), the offer of the batch's completions to the completions log
(:func:`completion_rows`) and how its records are keyed in the buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from comlrl.core import algos
from comlrl.core.logging.completions import tree_rows
from comlrl.core.rewards.shaping import apply_kl_shaping
from comlrl.core.rollout import rollouts
from comlrl.core.rollout.record import RolloutGroup, attach_logprobs, rollout_groups
from comlrl.core.rollout.tree import TreeNode

if TYPE_CHECKING:
    from comlrl.core.trainer import TrainerBase


@dataclass
class Collected:
    """One unit's rollout: the trees' roots, every node in walk order, ``per_agent[i][j]``,
    agent ``i``'s group at ``nodes[j]``, and what ``inspect`` returned (None without one)."""

    roots: list[TreeNode]
    nodes: list[TreeNode]
    per_agent: list[list[RolloutGroup]]
    seen: Any = None


def needs_old_logps(config: Any) -> bool:
    """Whether the registered policy loss that ``config.policy_loss`` names forms a ratio to
    the rollout policy (and so needs its per-token log-probs in the record)."""
    fn = algos.get("policy_loss", config.policy_loss, "policy_loss")
    return bool(getattr(fn, "needs_old_logps", False))


def collect_groups(
    trainer: TrainerBase,
    unit: Any,
    *,
    joint_mode: str = "aligned",
    discount: float | None = None,
    group_cls: type[RolloutGroup] = RolloutGroup,
    inspect: Callable[[list[TreeNode]], Any] | None = None,
    logprobs: bool = True,
    logprob_layout: str = "auto",
) -> Collected:
    """Roll out ``unit`` and build its record (see the module docstring).

    ``discount`` recomputes the returns at another discount than ``args.discount``;
    ``group_cls`` builds the groups; ``inspect(nodes)`` sees the trees before shaping and its
    result is kept as ``Collected.seen``. With ``logprobs`` the groups get the rollout policy's log-probs
    when the policy loss forms a ratio and the reference's when ``args.beta > 0`` (a family
    that scores them its own way passes False), the rollout policy's in the forwards of
    ``logprob_layout`` (the layout the family's update scores in)."""
    roots, nodes = rollouts.unit_trees(trainer, unit, joint_mode)
    seen = inspect(nodes) if inspect is not None else None
    kls = apply_kl_shaping(trainer, roots, nodes, discount=discount)
    per_agent = [
        rollout_groups(nodes, i, None if kls is None else kls[i], group_cls)
        for i in range(trainer.num_agents)
    ]
    if logprobs:
        args = trainer.args
        attach_logprobs(
            trainer,
            per_agent,
            old=needs_old_logps(args),
            reference=getattr(args, "beta", 0) > 0,
            layout=logprob_layout,
        )
    return Collected(roots, nodes, per_agent, seen)


def completion_rows(got: Collected) -> list[dict[str, Any]]:
    """The completions log's rows of a collected batch, with each completion's advantage (so
    after the family's math filled them)."""
    return tree_rows(got.nodes, [[g.advantages for g in groups] for groups in got.per_agent])


def node_order(per_agent: Sequence[Sequence[RolloutGroup]]) -> list[int]:
    """The nodes' indices in env-step order (the order records enter the buffer)."""
    first = per_agent[0]
    return sorted(range(len(first)), key=lambda j: first[j].step)
