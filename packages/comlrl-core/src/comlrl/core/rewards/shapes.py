"""What a reward function may return, and how its output is read.

A reward scores joint actions. For each joint action it gives either one *shared* value (every
agent is credited with it, the Dec-POMDP default) or one value *per agent*. A call that scores
``M`` joint actions of ``N`` agents may therefore return

* ``M`` numbers: one shared value per joint action;
* ``M`` rows of ``N`` numbers (nested lists or tuples, or a ``[M, N]`` tensor/array): one value
  per agent for every joint action;
* for a single joint action (``M == 1``) also a bare number, or ``N`` numbers: its per-agent
  vector.

Everything else is rejected by :func:`read_scores` with a :class:`RewardError` that names the
function, the shape it returned and the shapes that would be valid. :func:`coerce_output` keeps
the nesting of what the function returned, so a row per joint action is never flattened into
several joint rewards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

from .dispatch import RewardError

__all__ = [
    "RewardError",
    "RewardScores",
    "coerce_output",
    "describe_shape",
    "read_scores",
    "valid_shapes",
]


@dataclass(frozen=True)
class RewardScores:
    """The rewards of ``M`` joint actions of ``N`` agents.

    ``rows[j][i]`` is agent ``i``'s reward for joint action ``j``; with shared rewards every
    row repeats one value. ``per_agent`` says whether the function returned per-agent vectors
    (for any joint action of the batch).
    """

    rows: list[list[float]]
    per_agent: bool

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def shared(self) -> list[float]:
        """One value per joint action: the shared reward, or the mean over the agents' values."""
        if not self.per_agent:
            return [row[0] for row in self.rows]
        return [math.fsum(row) / len(row) for row in self.rows]

    def agent(self, i: int) -> list[float]:
        """Agent ``i``'s reward for each joint action."""
        return [row[i] for row in self.rows]

    def as_output(self) -> list[float] | list[list[float]]:
        """Plain lists: one value per joint action when shared, else one row per joint action."""
        if self.per_agent:
            return [list(row) for row in self.rows]
        return self.shared

    @classmethod
    def from_shared(cls, values: list[float], num_agents: int) -> RewardScores:
        """Scores whose every agent gets the joint action's one value."""
        return cls([[float(v)] * num_agents for v in values], per_agent=False)

    @classmethod
    def concat(cls, parts: list[RewardScores]) -> RewardScores:
        """One batch from several (a per-agent part makes the whole batch per-agent)."""
        rows = [list(row) for part in parts for row in part.rows]
        return cls(rows, per_agent=any(part.per_agent for part in parts))


def _number(value: Any, label: str, where: str) -> float:
    if isinstance(value, (str, bytes)):
        raise RewardError(
            f"Reward function {label!r} returned a non-numeric value {value!r} {where}; every "
            "reward must be a number."
        )
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise RewardError(
            f"Reward function {label!r} returned a value that is not a number: {value!r} "
            f"({where}, type {type(value).__name__})."
        ) from exc


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def coerce_output(result: Any, label: str) -> list[float] | list[list[float]]:
    """A reward function's result as a flat list of floats or a list of float rows.

    Tensors and arrays go through ``tolist``; a bare number becomes a one-element list. A mix of
    numbers and rows, rows nested deeper than one level, or anything that is not a number raises
    :class:`RewardError` naming the function.
    """
    if isinstance(result, (str, bytes)):
        raise RewardError(
            f"Reward function {label!r} returned a string ({result!r}); it must return numbers."
        )
    if hasattr(result, "tolist") and callable(result.tolist):
        # torch tensors, numpy arrays and numpy scalars; no torch import needed here.
        result = result.tolist()
    if not _is_sequence(result):
        return [_number(result, label, "as its result")]
    values = list(result)
    nested = [_is_sequence(v) or hasattr(v, "tolist") and not _is_scalar_like(v) for v in values]
    if not any(nested):
        return [_number(v, label, f"at index {j}") for j, v in enumerate(values)]
    if not all(nested):
        raise RewardError(
            f"Reward function {label!r} returned a mix of numbers and lists "
            f"({describe_shape(result)}); return one number per joint action, or one list of "
            "per-agent values per joint action."
        )
    rows: list[list[float]] = []
    for j, row in enumerate(values):
        if hasattr(row, "tolist"):
            row = row.tolist()
        if any(_is_sequence(v) or hasattr(v, "tolist") and not _is_scalar_like(v) for v in row):
            raise RewardError(
                f"Reward function {label!r} returned lists nested too deeply "
                f"({describe_shape(result)}); per joint action it may return one number or "
                "one flat list of per-agent values."
            )
        rows.append([_number(v, label, f"at index [{j}][{i}]") for i, v in enumerate(row)])
    return rows


def _is_scalar_like(value: Any) -> bool:
    """Numpy/torch scalars have ``tolist`` too but are numbers, not rows."""
    shape = getattr(value, "shape", None)
    return shape is not None and len(tuple(shape)) == 0


def describe_shape(result: Any) -> str:
    """A short description of a (coerced or raw) result's shape, for error messages."""
    if hasattr(result, "shape") and not isinstance(result, (list, tuple)):
        return f"a {type(result).__name__} of shape {list(result.shape)}"
    if not _is_sequence(result):
        return f"a single {type(result).__name__}"
    if result and all(_is_sequence(r) for r in result):
        lengths = sorted({len(r) for r in result})
        inner = lengths[0] if len(lengths) == 1 else f"lengths {lengths}"
        return f"{len(result)} rows of {inner} values"
    return f"a flat list of {len(result)} values"


def valid_shapes(m: int, n: int) -> str:
    """The shapes a call scoring ``m`` joint actions of ``n`` agents may return."""
    if m == 1:
        shapes = "a single number (the shared value)"
        if n > 1:
            shapes += f", or {n} numbers (one per agent) as a flat list or a single row"
        return shapes
    shapes = f"{m} numbers (one shared value per joint action)"
    if n > 1:
        shapes += f", or {m} rows of {n} numbers (one value per agent per joint action)"
    return shapes


def _actions(m: int) -> str:
    return "1 joint action" if m == 1 else f"{m} joint actions"


def _agents(n: int) -> str:
    return "1 agent" if n == 1 else f"{n} agents"


def read_scores(
    output: list[float] | list[list[float]], m: int, n: int, label: str
) -> RewardScores:
    """Interpret a coerced result for a call that scored ``m`` joint actions of ``n`` agents.

    The caller decides beforehand what a flat list of ``n`` values means when ``m == n``; here a
    flat list of ``m`` values is always one shared value per joint action.
    """
    if output and _is_sequence(output[0]):
        rows = cast("list[list[float]]", output)  # the coercion made every row a list
        if len(rows) == m and all(len(r) == n for r in rows):
            return RewardScores([list(r) for r in rows], per_agent=n > 1)
        raise RewardError(
            f"Reward function {label!r} returned {describe_shape(rows)} for {_actions(m)} of "
            f"{_agents(n)}; valid results are {valid_shapes(m, n)}."
        )
    flat = cast("list[float]", output)  # not rows (checked above): one value each
    if len(flat) == m:
        return RewardScores.from_shared(flat, n)
    if m == 1 and len(flat) == n:
        return RewardScores([list(flat)], per_agent=n > 1)
    if not output:
        raise RewardError(
            f"Reward function {label!r} returned no values for {_actions(m)}; valid results "
            f"are {valid_shapes(m, n)}."
        )
    shown = output if len(output) <= 16 else [*output[:8], "..."]
    raise RewardError(
        f"Reward function {label!r} returned {len(output)} values for {_actions(m)} of "
        f"{_agents(n)}; valid results are {valid_shapes(m, n)}. Got: {shown}."
    )
