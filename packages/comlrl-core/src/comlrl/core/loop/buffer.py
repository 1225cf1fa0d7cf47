"""The rollout buffer between ``collect`` and ``update``.

``collect`` returns a :class:`Batch` of :class:`BufferEntry` objects, each the experience of one
tree node or one episode: every agent's samples, plus optional joint samples (a centralized
critic's) and metrics to log when the entry enters the buffer. The loop adds entries in order
and runs an update whenever agent 0 holds ``capacity`` samples, so a batch can fill the buffer
several times, and a partly filled buffer waits for the next batch (or the end of the stage).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BufferEntry:
    """One node's or episode's experience: ``samples[agent]`` lists that agent's samples."""

    samples: list[list[Any]]
    step: int
    joint: list[Any] = field(default_factory=list)
    metrics: dict[str, float] | None = None


@dataclass
class Batch:
    """What ``collect`` returns: entries in the order the buffer should take them. A ``whole``
    batch enters the buffer entirely before the loop checks whether it is full, so all of its
    entries are trained in the one update that follows (none waits, sampled by a policy one
    update older, for the next)."""

    entries: list[BufferEntry]
    whole: bool = False


@dataclass
class Experience:
    """A full (or final) buffer: each agent's samples, the joint samples, and the env step of
    the newest experience in it (the step its update is logged at)."""

    samples: list[list[Any]]
    joint: list[Any]
    step: int


class RolloutBuffer:
    """Per-agent sample lists (and joint samples) awaiting an update."""

    def __init__(self, num_agents: int, capacity: int):
        self.num_agents = num_agents
        self.capacity = capacity
        self.clear()

    def clear(self) -> None:
        """Forget everything (after a successful update)."""
        self.samples: list[list[Any]] = [[] for _ in range(self.num_agents)]
        self.joint: list[Any] = []
        self.step = -1

    def add(self, entry: BufferEntry) -> None:
        """Append ``entry``'s samples."""
        for mine, new in zip(self.samples, entry.samples):
            mine.extend(new)
        self.joint.extend(entry.joint)
        self.step = max(self.step, entry.step)

    def full(self) -> bool:
        """Whether agent 0 holds at least ``capacity`` samples."""
        return len(self.samples[0]) >= self.capacity

    def empty(self) -> bool:
        """Whether no agent holds a sample."""
        return not any(self.samples)

    def contents(self) -> Experience:
        """The buffer's experience (copies of the lists; the buffer itself is unchanged)."""
        return Experience([list(s) for s in self.samples], list(self.joint), max(self.step, 0))

    # The keys :meth:`state_dict` writes (the critic's only with a joint buffer).
    STATE_KEYS = ("rollout_buffers", "buffer_step", "critic_buffer")

    def state_dict(self, to_state: Callable[[Any], Any], joint_to_state=None) -> dict[str, Any]:
        """Plain data for checkpoints, samples written by ``to_state``."""
        state: dict[str, Any] = {
            "rollout_buffers": [[to_state(s) for s in b] for b in self.samples],
            "buffer_step": self.step,
        }
        if joint_to_state is not None:
            state["critic_buffer"] = [joint_to_state(s) for s in self.joint]
        return state

    def load_state_dict(self, state: dict[str, Any], from_state, joint_from_state=None) -> None:
        """Inverse of :meth:`state_dict`."""
        self.samples = [[from_state(s) for s in b] for b in state["rollout_buffers"]]
        self.joint = [joint_from_state(s) for s in state.get("critic_buffer", [])]
        self.step = int(state["buffer_step"])
