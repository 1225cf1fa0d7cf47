"""The single entry point trainers use to score a batch of joint actions."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .dispatch import (
    RewardError,
    call_reward_function,
    check_reward_signature,
    describe_callable,
    non_finite_indices,
    receives_nested_lists,
)
from .ranges import get_reward_range

__all__ = ["CALL_MODES", "RewardCaller"]

CALL_MODES = ("auto", "batch", "per_sample")

# Long batches would otherwise flood an error message with every bad value.
_MAX_SHOWN = 8


def _show(indices: Sequence[int], values: Sequence[float]) -> str:
    pairs = ", ".join(f"[{i}]={values[i]!r}" for i in indices[:_MAX_SHOWN])
    more = len(indices) - _MAX_SHOWN
    return pairs + (f", ... ({more} more)" if more > 0 else "")


class RewardCaller:
    """Score joint actions with a user reward function, validating everything it returns.

    ``reward_func`` is dispatched by its signature (see :func:`call_reward_function`).
    ``call_mode`` chooses how a batch of ``M`` joint actions reaches it:

    * ``"batch"``: one call with all ``M`` joint actions; it must return exactly ``M`` values.
    * ``"per_sample"``: ``M`` calls, each with one-element lists. Each call must return at least
      one value, and only the first one is used — that is the reference implementation's
      behaviour, kept for functions written against it.
    * ``"auto"`` (default): start in batch mode. If a batch of ``M > 1`` comes back as a single
      value, the function is taken to score one joint action per call: a warning is emitted, this
      caller switches to ``"per_sample"`` for good, and the batch is scored again per sample.
      Once a batch of ``M > 1`` comes back with ``M`` values the caller settles on ``"batch"``.

    Raw values must be finite; ``reward_processor`` (a ``Callable[[float], float]``) is then
    applied to each, and its outputs must be finite too. Any violation raises
    :class:`RewardError` naming the function (or processor) and the offending values.
    Exceptions raised by the reward function itself propagate unchanged.

    Attributes:
        reward_func: the wrapped reward function.
        reward_processor: the processor, or None.
        num_agents: number of agents (per-agent completion lists per call).
        reward_range: the function's declared ``(low, high)`` range, or None.
        num_calls: how many times ``reward_func`` has been invoked.
    """

    def __init__(
        self,
        reward_func: Callable,
        *,
        num_agents: int,
        reward_processor: Callable[[float], float] | None = None,
        call_mode: str = "auto",
    ) -> None:
        if not callable(reward_func):
            raise ValueError(
                "reward_func must be a callable that takes per-agent completion lists and "
                f"returns one reward per joint action, got {reward_func!r}."
            )
        if reward_processor is not None and not callable(reward_processor):
            raise ValueError(
                "reward_processor must be None or a callable mapping a float to a float, "
                f"got {reward_processor!r}."
            )
        if not isinstance(call_mode, str) or call_mode not in CALL_MODES:
            raise ValueError(f"call_mode must be one of {list(CALL_MODES)}, got {call_mode!r}.")
        # Signature problems surface here, before any model is loaded or sample generated.
        check_reward_signature(reward_func, num_agents=num_agents)

        self.reward_func = reward_func
        self.reward_processor = reward_processor
        self.num_agents: int = num_agents
        self.reward_range: tuple[float, float] | None = get_reward_range(reward_func)
        self.num_calls = 0
        self._mode = call_mode
        self._label = describe_callable(reward_func)
        self._processor_label = (
            describe_callable(reward_processor) if reward_processor is not None else None
        )

    @property
    def call_mode(self) -> str:
        """The mode in effect now; ``"auto"`` may have settled on ``"batch"`` or ``"per_sample"``."""
        return self._mode

    def __repr__(self) -> str:
        return (
            f"RewardCaller({self._label}, num_agents={self.num_agents}, "
            f"call_mode={self._mode!r}, num_calls={self.num_calls})"
        )

    def __call__(
        self,
        agent_completions: list[list[str]],
        *,
        prompts: list[str],
        batch_items: list,
    ) -> list[float]:
        """Return one processed, finite reward per joint action.

        ``agent_completions[i][j]`` is agent ``i``'s completion in joint action ``j``;
        ``prompts[j]`` and ``batch_items[j]`` belong to joint action ``j``. An empty batch
        returns an empty list without calling the reward function.
        """
        m = self._batch_size(agent_completions, prompts, batch_items)
        if m == 0:
            return []

        if self._mode == "per_sample":
            raw = self._score_per_sample(agent_completions, prompts, batch_items, m)
        else:
            raw = self._invoke(agent_completions, prompts, batch_items)
            if self._mode == "auto" and m > 1 and len(raw) == 1:
                warnings.warn(
                    f"Reward function {self._label!r} returned one value for {m} joint actions; "
                    "it is now called once per joint action. Set reward_call_mode='per_sample' "
                    "in the trainer config (or make the function return one value per joint "
                    "action and set reward_call_mode='batch') to silence this warning.",
                    UserWarning,
                    stacklevel=2,
                )
                self._mode = "per_sample"
                raw = self._score_per_sample(agent_completions, prompts, batch_items, m)
            else:
                self._check_count(raw, m)
                if self._mode == "auto" and m > 1:
                    self._mode = "batch"

        self._check_finite(raw)
        return self._process(raw)

    def _invoke(
        self, agent_completions: list[list[str]], prompts: list[str], batch_items: list
    ) -> list[float]:
        self.num_calls += 1
        return call_reward_function(
            self.reward_func,
            agent_completions,
            num_agents=self.num_agents,
            prompts=prompts,
            batch_items=batch_items,
        )

    def _score_per_sample(
        self,
        agent_completions: list[list[str]],
        prompts: list[str],
        batch_items: list,
        m: int,
    ) -> list[float]:
        raw: list[float] = []
        for j in range(m):
            values = self._invoke(
                [[completions[j]] for completions in agent_completions],
                [prompts[j]],
                [batch_items[j]],
            )
            if not values:
                raise RewardError(
                    f"Reward function {self._label!r} returned no value for joint action {j} "
                    "(called per sample, one value expected)."
                )
            raw.append(values[0])
        return raw

    def _batch_size(self, agent_completions: Any, prompts: Any, batch_items: Any) -> int:
        if not isinstance(agent_completions, Sequence) or isinstance(agent_completions, str):
            raise ValueError(
                "agent_completions must be a list with one list of completions per agent, "
                f"got {type(agent_completions).__name__}."
            )
        if len(agent_completions) != self.num_agents:
            raise ValueError(
                f"agent_completions holds {len(agent_completions)} per-agent lists but the "
                f"reward caller was built for num_agents={self.num_agents}."
            )
        sizes = [len(c) for c in agent_completions]
        m = sizes[0]
        if any(size != m for size in sizes):
            raise ValueError(
                f"every agent must supply the same number of completions, got lengths {sizes}."
            )
        for name, seq in (("prompts", prompts), ("batch_items", batch_items)):
            if len(seq) != m:
                raise ValueError(
                    f"{name} has {len(seq)} entries but there are {m} joint actions; "
                    f"{name}[j] must belong to joint action j."
                )
        return m

    def _check_count(self, raw: list[float], m: int) -> None:
        if not raw:
            raise RewardError(
                f"Reward function {self._label!r} returned no values for {m} joint actions; "
                f"it must return {m} (one per joint action)."
            )
        if len(raw) != m:
            shown = raw if len(raw) <= 2 * _MAX_SHOWN else [*raw[:_MAX_SHOWN], "..."]
            raise RewardError(
                f"Reward function {self._label!r} returned {len(raw)} values for {m} joint "
                f"actions; it must return exactly {m} (one per joint action). Got: {shown}."
                + self._per_agent_hint(len(raw))
            )

    def _per_agent_hint(self, count: int) -> str:
        """Why a TRL-style ``reward(completions, **kwargs)`` returns one value per agent."""
        if count != self.num_agents or not receives_nested_lists(self.reward_func, self.num_agents):
            return ""
        return (
            f" Its one positional parameter receives one list of completions per agent "
            f"([agent_0_completions, ..., agent_{self.num_agents - 1}_completions]), not one "
            "flat list as in TRL: score zip(*completions) for one value per joint action, or "
            f"take {self.num_agents} positional parameters, one per agent."
        )

    def _check_finite(self, raw: list[float]) -> None:
        bad = non_finite_indices(raw)
        if bad:
            raise RewardError(
                f"Reward function {self._label!r} returned non-finite reward(s) (NaN or inf) "
                f"at joint action(s) {bad[:_MAX_SHOWN]}: {_show(bad, raw)}."
            )

    def _process(self, raw: list[float]) -> list[float]:
        if self.reward_processor is None:
            return raw
        processed: list[float] = []
        for index, value in enumerate(raw):
            out = self.reward_processor(value)
            try:
                processed.append(float(out))
            except (TypeError, ValueError) as exc:
                raise RewardError(
                    f"reward_processor {self._processor_label!r} returned {out!r} for reward "
                    f"{value!r} (joint action {index}); it must return a number."
                ) from exc
        bad = [i for i, v in enumerate(processed) if not math.isfinite(v)]
        if bad:
            inputs = ", ".join(f"{raw[i]!r}->{processed[i]!r}" for i in bad[:_MAX_SHOWN])
            raise RewardError(
                f"reward_processor {self._processor_label!r} produced non-finite value(s) for "
                f"reward function {self._label!r} at joint action(s) {bad[:_MAX_SHOWN]}: "
                f"{inputs}."
            )
        return processed
