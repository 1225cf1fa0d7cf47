"""How the actor-critic buffer checkpoints: core's :class:`ValueGroup` states, and the per
completion ``RolloutSample`` states that checkpoints written before the family moved onto
core's record hold.

An older state becomes a group of one completion (:meth:`BufferCodec.from_state`);
:func:`regroup` then joins the completions of one tree node again, so a resumed buffer counts
and orders its completions as the run that wrote it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from comlrl.core.rollout.record import ValueGroup


def is_sample_state(state: dict[str, Any]) -> bool:
    """Whether ``state`` is a ``RolloutSample`` of an older checkpoint (not a group)."""
    return "agent_idx" in state and "completion" in state


def group_of_sample_state(state: dict[str, Any]) -> ValueGroup:
    """An older checkpoint's ``RolloutSample`` state as a one-completion group."""
    metadata = state.get("metadata") or {}
    reward = float(state["reward"])
    joint = metadata.get("joint_reward")
    kl = state.get("reference_kl")
    old_logps = state.get("old_logps")
    return ValueGroup(
        agent=int(state["agent_idx"]),
        turn=int(state["turn_idx"]),
        step=int(state.get("env_step", 0)),
        prompt_ids=list(state["prompt_ids"]),
        completion_ids=[list(state["completion_ids"])],
        returns=[float(state["returns"])],
        rewards=[float(metadata.get("shaped_reward", reward))],
        advantages=[float(state["advantage"])],
        kls=[] if kl is None else [float(kl)],
        old_logps=[] if old_logps is None else [list(old_logps)],
        node_reward=reward if joint is None else float(joint),
        node_return=float(state["returns"]),
        own_reward=None if joint is None else reward,
        values=[float(state["old_value"])],
        targets=[float(state["value_target"])],
    )


def regroup(groups: list[ValueGroup]) -> list[ValueGroup]:
    """One group per tree node again: consecutive groups of one node (same agent, turn and
    env step; nodes' env steps differ) joined in order, their node means recomputed."""
    out: list[list[ValueGroup]] = []
    for g in groups:
        last = out[-1][0] if out else None
        if last is not None and (last.agent, last.turn, last.step) == (g.agent, g.turn, g.step):
            out[-1].append(g)
        else:
            out.append([g])
    return [_joined(parts) for parts in out]


def _joined(parts: list[ValueGroup]) -> ValueGroup:
    if len(parts) == 1:
        return parts[0]
    first = parts[0]

    def cat(attr: str) -> list:
        return [v for p in parts for v in getattr(p, attr)]

    owns = [p.own_reward for p in parts]
    return ValueGroup(
        agent=first.agent,
        turn=first.turn,
        step=first.step,
        prompt_ids=first.prompt_ids,
        completion_ids=cat("completion_ids"),
        returns=cat("returns"),
        rewards=cat("rewards"),
        advantages=cat("advantages"),
        kls=cat("kls"),
        old_logps=cat("old_logps"),
        node_reward=float(np.mean([p.node_reward for p in parts])),
        node_return=float(np.mean([p.node_return for p in parts])),
        own_reward=None if owns[0] is None else float(np.mean(owns)),
        values=cat("values"),
        targets=cat("targets"),
    )


@dataclass(frozen=True)
class BufferCodec:
    """The trainer's ``sample_cls``: buffered groups to checkpoint states and back, older
    ``RolloutSample`` states read as one-completion groups (see :func:`regroup`)."""

    def to_state(self, group: ValueGroup) -> dict[str, Any]:
        """Plain data for checkpoints."""
        return group.to_state()

    def from_state(self, state: dict[str, Any]) -> ValueGroup:
        """Inverse of :meth:`to_state`, older layouts included."""
        if is_sample_state(state):
            return group_of_sample_state(state)
        return ValueGroup.from_state(state)
