"""Several reward functions scored as one: ``r = sum_f w_f * r_f`` per joint action.

:class:`WeightedRewards` is itself a reward function (it takes every agent's completions
positionally and ``prompts``/``batch_items`` by keyword), so a trainer wraps it in its usual
:class:`~comlrl.core.rewards.RewardCaller`, which validates the sum and applies the reward
processor. Each component is dispatched by its own signature and validated by its own caller
(no processor), and the mean of each component since the last :meth:`drain` is kept for the
training metrics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .caller import RewardCaller
from .dispatch import describe_callable


def _check_weights(weights: Sequence[float] | None, count: int) -> list[float]:
    if weights is None:
        return [1.0] * count
    if not isinstance(weights, (list, tuple)) or len(weights) != count:
        raise ValueError(
            f"reward_weights must be a list of {count} numbers (one per reward function), "
            f"got {weights!r}."
        )
    out = []
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
            raise ValueError(f"reward_weights must hold finite numbers, got {w!r}.")
        out.append(float(w))
    return out


def _unique_names(funcs: Sequence[Callable]) -> list[str]:
    names = [describe_callable(f).rsplit(".", 1)[-1] for f in funcs]
    return [f"{n}_{i}" if names.count(n) > 1 else n for i, n in enumerate(names)]


class WeightedRewards:
    """The weighted sum of ``funcs`` (weights ``weights``; None: all 1.0).

    ``recording()`` (default: always) says whether a call counts towards the component means
    (a trainer passes "not evaluating"). ``num_agents`` None defers the components' signature
    checks to :meth:`bind` (or the first call)."""

    def __init__(
        self,
        funcs: Sequence[Callable],
        weights: Sequence[float] | None = None,
        *,
        num_agents: int | None = None,
        call_mode: str = "auto",
        recording: Callable[[], bool] | None = None,
    ) -> None:
        funcs = list(funcs)
        if not funcs:
            raise ValueError("reward_func must be a callable or a non-empty list of callables.")
        self.weights = _check_weights(weights, len(funcs))
        self.funcs, self.call_mode = funcs, call_mode
        self.callers: list[RewardCaller] = []
        if num_agents is not None:
            self.bind(num_agents)
        self.names = _unique_names(funcs)
        self._recording = recording or (lambda: True)
        self._sums = [0.0] * len(funcs)
        self._count = 0
        self.__name__ = "+".join(self.names)
        # Always one weighted value per joint action: callers need not probe the shape.
        self.one_value_per_joint_action = True

    def bind(self, num_agents: int) -> None:
        """Build one validating caller per component for ``num_agents`` agents (checking each
        function's signature now)."""
        self.callers = [
            RewardCaller(f, num_agents=num_agents, call_mode=self.call_mode) for f in self.funcs
        ]

    def __call__(self, *agent_completions: list[str], **context) -> list[float]:
        """One weighted reward per joint action."""
        comps = [list(c) for c in agent_completions]
        if not self.callers:
            self.bind(len(comps))
        prompts: Any = context.get("prompts")
        items: Any = context.get("batch_items")
        parts: list[list[float]] = []
        for func, caller in zip(self.funcs, self.callers):
            scores = caller.score(comps, prompts=prompts, batch_items=items)
            if scores.per_agent:
                raise ValueError(
                    f"weighted reward component {func!r} returned per-agent values; each "
                    "component of a weighted reward returns one value per joint action."
                )
            parts.append(scores.shared)
        if self._recording():
            for f, values in enumerate(parts):
                self._sums[f] += sum(values)
            self._count += len(parts[0])
        return [sum(w * p[j] for w, p in zip(self.weights, parts)) for j in range(len(parts[0]))]

    def drain(self) -> dict[str, float]:
        """Each component's mean since the last drain (``{name: mean}``), then start over."""
        if self._count == 0:
            return {}
        out = {name: s / self._count for name, s in zip(self.names, self._sums)}
        self._sums = [0.0] * len(self._sums)
        self._count = 0
        return out
