"""Preference pairs: records, and how pairs are chosen among scored joint candidates.

A pair holds, for every actor, the prompt token ids and the winner's and loser's completion token
ids exactly as they were sampled ("token in, token out"), so the DPO loss scores the very tokens
the policy produced, EOS included. Texts are kept for reward models, replay files and people.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class AgentPreferenceTensors:
    """One actor's side of a pair as 1-D CPU long tensors (the CoMLRL record layout)."""

    prompt_input_ids: torch.Tensor
    winner_completion_ids: torch.Tensor
    loser_completion_ids: torch.Tensor


@dataclass
class PreferencePair:
    """A joint winner and a joint loser for one dataset item.

    Lists are per actor: ``prompts[i]``, ``winner_completions[i]`` and ``winner_ids[i]`` belong to
    actor ``i``. Rewards are processed task rewards (or reward-model scores); ``raw_rewards`` holds
    the unprocessed winner and loser values. In the iterative trainers one side is the target
    (current policy) and the other the comparator; ``target_is_winner`` says which won.
    ``reference_logps[i]`` caches actor ``i``'s reference log-probs ``(winner, loser)``.
    ``agent`` names the one actor a pair ranked by per-agent rewards trains (None: every actor).
    """

    prompts: list[str]
    winner_completions: list[str]
    loser_completions: list[str]
    prompt_ids: list[list[int]]
    winner_ids: list[list[int]]
    loser_ids: list[list[int]]
    winner_reward: float
    loser_reward: float
    candidate_reward_mean: float
    raw_rewards: list[float] | None = None
    target_raw_reward: float | None = None
    comparator_raw_reward: float | None = None
    target_is_winner: bool | None = None
    iteration: int | None = None
    reference_logps: list[list[float]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # With per-agent rewards a pair is ranked by one agent's own reward and trains only that
    # agent (the other actors' margins enter its loss detached); None: ranked by the shared
    # reward, trains every actor.
    agent: int | None = None

    @property
    def num_actors(self) -> int:
        """How many actors (agents, or one joint actor) the pair covers."""
        return len(self.prompt_ids)

    @property
    def agent_tensors(self) -> list[AgentPreferenceTensors]:
        """Per-actor tensors in the CoMLRL layout (built on demand)."""
        return [
            AgentPreferenceTensors(
                torch.tensor(p, dtype=torch.long),
                torch.tensor(w, dtype=torch.long),
                torch.tensor(lo, dtype=torch.long),
            )
            for p, w, lo in zip(self.prompt_ids, self.winner_ids, self.loser_ids)
        ]

    def to_record(self) -> dict[str, Any]:
        """Plain JSON-able data (replay files, checkpoints)."""
        return {
            "prompts": list(self.prompts),
            "winner_completions": list(self.winner_completions),
            "loser_completions": list(self.loser_completions),
            "prompt_ids": [list(x) for x in self.prompt_ids],
            "winner_ids": [list(x) for x in self.winner_ids],
            "loser_ids": [list(x) for x in self.loser_ids],
            "winner_reward": float(self.winner_reward),
            "loser_reward": float(self.loser_reward),
            "candidate_reward_mean": float(self.candidate_reward_mean),
            "raw_rewards": None
            if self.raw_rewards is None
            else [float(r) for r in self.raw_rewards],
            "target_raw_reward": self.target_raw_reward,
            "comparator_raw_reward": self.comparator_raw_reward,
            "target_is_winner": self.target_is_winner,
            "iteration": self.iteration,
            "reference_logps": self.reference_logps,
            "extra": dict(self.extra),
            **({} if self.agent is None else {"agent": int(self.agent)}),
        }

    def completion_row(self) -> dict[str, Any]:
        """The pair as a row of the completions log (texts and rewards, no token ids)."""
        return {
            "prompts": list(self.prompts),
            "chosen": list(self.winner_completions),
            "rejected": list(self.loser_completions),
            "chosen_reward": float(self.winner_reward),
            "rejected_reward": float(self.loser_reward),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> PreferencePair:
        """Inverse of :meth:`to_record`."""
        data = dict(record)
        for key in ("prompt_ids", "winner_ids", "loser_ids"):
            data[key] = [[int(t) for t in row] for row in data[key]]
        if data.get("reference_logps") is not None:
            data["reference_logps"] = [[float(v) for v in row] for row in data["reference_logps"]]
        data.setdefault("extra", {})
        return cls(**data)


def candidate_pairs(rewards: Sequence[float]) -> list[tuple[int, int, float]]:
    """Every ordered ``(winner, loser, gap)`` with a strictly positive reward gap (ties dropped)."""
    out = []
    for i, ri in enumerate(rewards):
        for j, rj in enumerate(rewards):
            gap = ri - rj
            if gap > 0:
                out.append((i, j, gap))
    return out


def select_pairs(
    pairs: list[tuple[int, int, float]],
    mode: str,
    cap: int | None,
    rng: random.Random,
    sort_key=None,
) -> list[tuple[int, int, float]]:
    """Order candidate pairs by ``mode`` and keep the first ``cap`` (all under "all").

    ``reward_gap`` puts the largest gaps first, ``random`` shuffles with ``rng``, ``all`` keeps
    index order, and ``comparator_reward`` sorts by ``sort_key`` (descending).
    """
    chosen = list(pairs)
    if mode == "reward_gap":
        chosen.sort(key=lambda p: p[2], reverse=True)
    elif mode == "random":
        rng.shuffle(chosen)
    elif mode == "all":
        chosen.sort(key=lambda p: (p[0], p[1]))
        return chosen
    elif mode == "comparator_reward":
        if sort_key is None:
            raise ValueError("pair_selection='comparator_reward' needs comparator rewards.")
        chosen.sort(key=sort_key, reverse=True)
    else:
        raise ValueError(f"pair_selection {mode!r} is not supported here.")
    return chosen if cap is None else chosen[:cap]
