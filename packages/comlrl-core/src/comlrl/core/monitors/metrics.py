"""What the monitors measure, from what core already holds.

- From an update's experience (the rollout record:
  :class:`~comlrl.core.rollout.record.RolloutGroup` and its subclasses), per agent and turn:
  the mean completion length in tokens, the share of groups whose K completions all got the same task reward (no learning signal), the mean
  per-token KL to the reference that reward shaping took; and per turn the mean training reward
  (for the train/eval gap).
- From the update's optimizer steps (:func:`comlrl.core.training.train_step.train_step`), per agent and
  turn: the token entropy measured in the policy-gradient forwards, and what the policy loss
  reported as ``clip_fraction`` and ``kl`` (a KL term in the loss).

Samples of other kinds (the preference family's pairs) carry none of these and are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

PREFIX = "monitors"
# Rewards of one group closer than this (relative to their size) count as tied.
TIE_TOLERANCE = 1e-6


def key(agent: int | None, turn: int | None, name: str) -> str:
    """The metric key of monitor ``name`` for ``agent`` and ``turn`` (0-based; shown 1-based
    for turns, as the other turn metrics): ``monitors/agent_0/turn_1/kl``; a None part is left
    out (``monitors/turn_1/train_eval_gap``)."""
    parts = [PREFIX]
    if agent is not None:
        parts.append(f"agent_{agent}")
    if turn is not None:
        parts.append(f"turn_{turn + 1}")
    return "/".join([*parts, name])


def parse_key(metric: str) -> tuple[int | None, int | None, str] | None:
    """Inverse of :func:`key` (None for a key that is not a monitor's)."""
    parts = metric.split("/")
    if len(parts) < 2 or parts[0] != PREFIX:
        return None
    agent = turn = None
    for part in parts[1:-1]:
        if part.startswith("agent_") and part[6:].isdigit():
            agent = int(part[6:])
        elif part.startswith("turn_") and part[5:].isdigit():
            turn = int(part[5:]) - 1
        else:
            return None
    return agent, turn, parts[-1]


def parse_monitor_key(metric: str) -> tuple[int | None, int | None, str]:
    """:func:`parse_key` of a key known to be a monitor's (ValueError for any other)."""
    parsed = parse_key(metric)
    if parsed is None:
        raise ValueError(f"{metric!r} is not a monitor's metric key.")
    return parsed


def _tied(values: Sequence[float]) -> bool:
    low, high = min(values), max(values)
    return high - low <= TIE_TOLERANCE * max(1.0, abs(high), abs(low))


def _record_groups(groups: Iterable[Any]) -> list[Any]:
    """The samples of ``groups`` that are rollout-record groups (the others are skipped)."""
    # Imported here: the config base imports this package, and the record imports the config.
    from comlrl.core.rollout.record import RolloutGroup

    return [g for g in groups if isinstance(g, RolloutGroup) and g.completion_ids]


def task_rewards(group: Any, kl_coef: float) -> list[float]:
    """Each completion's reward before KL shaping took ``kl_coef * kl`` off it."""
    if not group.kls or not kl_coef:
        return list(group.rewards)
    return [r + kl_coef * kl for r, kl in zip(group.rewards, group.kls)]


def record_values(samples: Sequence[Iterable[Any]], kl_coef: float) -> dict[str, float]:
    """The record-derived monitor values of one update's experience (``samples[agent]``: that
    agent's samples), keyed by :func:`key`. ``kl_coef`` is the reward-shaping coefficient
    (0 when the KL is not in the reward)."""
    by_cell: dict[tuple[int, int], list[Any]] = {}
    for agent, groups in enumerate(samples):
        for g in _record_groups(groups):
            by_cell.setdefault((agent, g.turn), []).append(g)
    out: dict[str, float] = {}
    for (agent, turn), groups in sorted(by_cell.items()):
        lengths = [len(c) for g in groups for c in g.completion_ids]
        out[key(agent, turn, "completion_length")] = float(np.mean(lengths))
        rewards = [task_rewards(g, kl_coef) for g in groups]
        sized = [r for r in rewards if len(r) > 1]
        if sized:
            tied = sum(_tied(r) for r in sized)
            out[key(agent, turn, "zero_variance_fraction")] = tied / len(sized)
        with_kl = [g for g in groups if g.kls]
        if with_kl:
            tokens = sum(max(1, len(c)) for g in with_kl for c in g.completion_ids)
            out[key(agent, turn, "kl")] = float(sum(sum(g.kls) for g in with_kl) / tokens)
    return out


def train_rewards(samples: Sequence[Iterable[Any]]) -> dict[int, float]:
    """The mean environment reward of each turn (0-based) in one update's experience: the
    joint reward of the nodes, as evaluation's ``eval/turn_<t>/reward_mean`` measures it."""
    by_turn: dict[int, list[float]] = {}
    for groups in samples[:1]:  # every agent's groups sit at the same nodes
        for g in _record_groups(groups):
            by_turn.setdefault(g.turn, []).append(float(g.node_reward))
    return {turn: float(np.mean(r)) for turn, r in sorted(by_turn.items())}


@dataclass
class StepTally:
    """What one update's optimizer steps of one agent and turn reported: entropy summed over
    tokens, and the per-step ``clip_fraction`` and ``kl`` values."""

    entropy_sum: float = 0.0
    entropy_tokens: float = 0.0
    clip_fractions: list[float] | None = None
    kls: list[float] | None = None

    def add_step(self, metrics: Mapping[str, Sequence[float]]) -> None:
        """Take one step's per-part metrics (``StepResult.metrics``)."""
        for name, attr in (("clip_fraction", "clip_fractions"), ("kl", "kls")):
            values = metrics.get(name)
            if values:
                found = getattr(self, attr) or []
                found.append(float(np.mean(values)))
                setattr(self, attr, found)

    def values(self, agent: int, turn: int | None) -> dict[str, float]:
        """The tally as monitor values keyed by :func:`key`."""
        out: dict[str, float] = {}
        if self.entropy_tokens > 0:
            out[key(agent, turn, "entropy")] = self.entropy_sum / self.entropy_tokens
        if self.clip_fractions:
            out[key(agent, turn, "clip_fraction")] = float(np.mean(self.clip_fractions))
        if self.kls:
            out[key(agent, turn, "kl")] = float(np.mean(self.kls))
        return out


class EntropyMeter:
    """Adds up the token entropies of the forwards scored inside one optimizer step (the log-prob
    engine hands it every forward's :class:`~comlrl.core.logprobs.TokenLogprobs`). Sums stay on
    the device until :meth:`totals` reads them, so measuring adds no device sync per forward."""

    def __init__(self) -> None:
        self._sum: torch.Tensor | None = None
        self._tokens: torch.Tensor | None = None

    def add(self, entropy: torch.Tensor, mask: torch.Tensor) -> None:
        """Count the real tokens (``mask``) of one forward's ``entropy``."""
        total = (entropy * mask).sum().detach().double()
        count = mask.sum().detach().double()
        if self._sum is None or self._tokens is None:
            self._sum, self._tokens = total, count
        else:
            self._sum = self._sum + total.to(self._sum.device)
            self._tokens = self._tokens + count.to(self._tokens.device)

    def totals(self) -> tuple[float, float]:
        """(entropy summed over tokens, tokens) so far."""
        if self._sum is None or self._tokens is None:
            return 0.0, 0.0
        return float(self._sum), float(self._tokens)
