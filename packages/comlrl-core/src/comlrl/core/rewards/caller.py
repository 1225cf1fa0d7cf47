"""The single entry point trainers use to score a batch of joint actions."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .dispatch import (
    RewardError,
    check_reward_signature,
    describe_callable,
    invoke_reward_function,
    non_finite_indices,
    receives_nested_lists,
)
from .ranges import get_reward_range
from .shapes import RewardScores, coerce_output, describe_shape, read_scores, valid_shapes

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

    ``reward_func`` is dispatched by its signature (see :func:`call_reward_function`). For each
    joint action it returns one shared value or one value per agent (the accepted shapes are
    listed in :mod:`comlrl.core.rewards.shapes`). ``call_mode`` chooses how a batch of ``M``
    joint actions reaches it:

    * ``"batch"``: one call with all ``M`` joint actions; it returns ``M`` values, or ``M`` rows
      of ``num_agents`` values.
    * ``"per_sample"``: ``M`` calls, each with one-element lists; each returns one value, or
      ``num_agents`` values (one per agent). Any other length is an error.
    * ``"auto"`` (default): start in batch mode. If a batch of ``M > 1`` comes back as a single
      value, or as ``num_agents`` values while ``M != num_agents``, the function is taken to
      score one joint action per call: a warning is emitted, this caller switches to
      ``"per_sample"`` for good, and the batch is scored again per sample. ``M`` values with
      ``M == num_agents`` could mean either; the first joint action is then scored alone once
      to tell (one value: batch of shared values; ``num_agents`` values: per-sample per-agent
      values; anything else: an error). Once a batch of ``M > 1`` is read as a batch, the
      caller settles on ``"batch"``.

    Raw values must be finite; ``reward_processor`` (a ``Callable[[float], float]``) is then
    applied to each (to every agent's value when they are per agent), and its outputs must be
    finite too. Any violation raises :class:`RewardError` naming the function (or processor),
    the shape it returned and the valid shapes. Exceptions raised by the reward function itself
    propagate unchanged.

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
        if call_mode == "auto" and getattr(reward_func, "one_value_per_joint_action", False):
            # The function declares its shape (e.g. WeightedRewards): nothing to probe, and a
            # probe call would count twice in the function's own statistics.
            self._mode = "batch"
        self._label = describe_callable(reward_func)
        self._processor_label = (
            describe_callable(reward_processor) if reward_processor is not None else None
        )

    @property
    def call_mode(self) -> str:
        """The mode in effect now; ``"auto"`` may have settled on ``"batch"`` or ``"per_sample"``."""
        return self._mode

    def restore_mode(self, mode: str) -> None:
        """Take the mode an earlier session of the same run settled on (a checkpoint's); only
        a caller still at ``"auto"`` takes it, so a resumed run does not probe the reward
        function again (a probe is a call, and a stateful function would count it)."""
        if self._mode == "auto" and mode in ("batch", "per_sample"):
            self._mode = mode

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
    ) -> list[float] | list[list[float]]:
        """Return the processed, finite rewards of a batch of joint actions.

        One value per joint action when the function gives shared rewards; one row of
        ``num_agents`` values per joint action when it gives per-agent rewards (see
        :meth:`score` for the structured result).
        """
        return self.score(agent_completions, prompts=prompts, batch_items=batch_items).as_output()

    def score(
        self,
        agent_completions: list[list[str]],
        *,
        prompts: list[str],
        batch_items: list,
    ) -> RewardScores:
        """Score a batch of joint actions; every agent's processed, finite reward per action.

        ``agent_completions[i][j]`` is agent ``i``'s completion in joint action ``j``;
        ``prompts[j]`` and ``batch_items[j]`` belong to joint action ``j``. An empty batch
        returns no rows without calling the reward function.
        """
        return self.score_raw_and_processed(
            agent_completions, prompts=prompts, batch_items=batch_items
        )[1]

    def score_raw_and_processed(
        self,
        agent_completions: list[list[str]],
        *,
        prompts: list[str],
        batch_items: list,
    ) -> tuple[RewardScores, RewardScores]:
        """:meth:`score`, with the raw (finite) rewards the function returned before the
        ``reward_processor``: ``(raw, processed)``, from one reward call (for a caller that
        reports both, e.g. the preference family's reward distributions)."""
        m = self._batch_size(agent_completions, prompts, batch_items)
        n = self.num_agents
        if m == 0:
            empty = RewardScores([], per_agent=False)
            return empty, empty

        if self._mode == "per_sample":
            scores = self._score_per_sample(agent_completions, prompts, batch_items, m)
        else:
            out = self._invoke(agent_completions, prompts, batch_items)
            flat = not (out and isinstance(out[0], list))
            undecided = self._mode == "auto" and m > 1
            if undecided and flat and len(out) != m and len(out) in (1, n):
                # One value (or one per agent) for a whole batch: written for one joint action.
                self._check_not_trl_style(len(out), m)
                self._switch_to_per_sample(m, len(out))
                scores = self._score_per_sample(agent_completions, prompts, batch_items, m)
            elif undecided and flat and n > 1 and len(out) == m == n:
                scores = self._settle_tie(out, agent_completions, prompts, batch_items, m)
            else:
                if flat and len(out) == n and m > 1:
                    self._check_not_trl_style(len(out), m)
                scores = read_scores(out, m, n, self._label)
                if undecided:
                    self._mode = "batch"

        self._check_finite(scores)
        return scores, self._process(scores)

    def _invoke(
        self, agent_completions: list[list[str]], prompts: list[str], batch_items: list
    ) -> list[float] | list[list[float]]:
        self.num_calls += 1
        result = invoke_reward_function(
            self.reward_func,
            agent_completions,
            num_agents=self.num_agents,
            prompts=prompts,
            batch_items=batch_items,
        )
        return coerce_output(result, self._label)

    def _switch_to_per_sample(self, m: int, count: int) -> None:
        what = "one value" if count == 1 else f"{count} values (one per agent)"
        warnings.warn(
            f"Reward function {self._label!r} returned {what} for {m} joint actions; it is now "
            "called once per joint action. Set reward_call_mode='per_sample' in the trainer "
            "config (or make the function return one value, or one row of per-agent values, "
            "per joint action and set reward_call_mode='batch') to silence this warning.",
            UserWarning,
            stacklevel=3,
        )
        self._mode = "per_sample"

    def _settle_tie(self, out, agent_completions, prompts, batch_items, m: int) -> RewardScores:
        """``m == num_agents`` values for ``m`` joint actions: shared values per joint action, or
        one joint action's per-agent values? Scoring the first joint action alone tells."""
        n = self.num_agents
        alone = self._invoke([[c[0]] for c in agent_completions], [prompts[0]], [batch_items[0]])
        if len(alone) == 1 and not isinstance(alone[0], list):
            self._mode = "batch"
            return RewardScores.from_shared(out, n)
        first = alone[0] if len(alone) == 1 else None
        per_agent_alone = len(alone) == n or (isinstance(first, list) and len(first) == n)
        if per_agent_alone:
            self._check_not_trl_style(n, m)
            self._switch_to_per_sample(m, n)
            head = read_scores(alone, 1, n, self._label)
            rest = self._score_per_sample(
                [c[1:] for c in agent_completions], prompts[1:], batch_items[1:], m - 1, start=1
            )
            return RewardScores.concat([head, rest])
        raise RewardError(
            f"Reward function {self._label!r} returned {m} values for {m} joint actions of {n} "
            f"agents, which could be one shared value per joint action or one joint action's "
            f"per-agent values; scored alone, the first joint action gave "
            f"{describe_shape(alone)}, which settles neither. Valid results are "
            f"{valid_shapes(m, n)} (or, per call with one joint action, "
            f"{valid_shapes(1, n)}). Set reward_call_mode='batch' (one value per joint action) "
            "or 'per_sample' (one call per joint action) to say which."
        )

    def _score_per_sample(
        self,
        agent_completions: list[list[str]],
        prompts: list[str],
        batch_items: list,
        m: int,
        start: int = 0,
    ) -> RewardScores:
        parts: list[RewardScores] = []
        for j in range(m):
            out = self._invoke(
                [[completions[j]] for completions in agent_completions],
                [prompts[j]],
                [batch_items[j]],
            )
            try:
                parts.append(read_scores(out, 1, self.num_agents, self._label))
            except RewardError as exc:
                raise RewardError(
                    f"{exc} (joint action {start + j}, called once per joint action)"
                ) from exc
        return RewardScores.concat(parts)

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

    def _check_not_trl_style(self, count: int, m: int) -> None:
        """A TRL-style ``reward(completions)`` receives one list per agent and naturally returns
        one value per *agent list*: that is a mistake far more often than per-agent rewards."""
        if count != self.num_agents or not receives_nested_lists(self.reward_func, self.num_agents):
            return
        raise RewardError(
            f"Reward function {self._label!r} returned {count} values for {m} joint actions. "
            f"Its one positional parameter receives one list of completions per agent "
            f"([agent_0_completions, ..., agent_{self.num_agents - 1}_completions]), not one "
            "flat list as in TRL: score zip(*completions) for one value per joint action, return "
            f"one row of {self.num_agents} values per joint action for per-agent rewards, or "
            f"take {self.num_agents} positional parameters, one per agent."
        )

    def _check_finite(self, scores: RewardScores) -> None:
        if not scores.per_agent:
            raw = scores.shared
            bad = non_finite_indices(raw)
            if bad:
                raise RewardError(
                    f"Reward function {self._label!r} returned non-finite reward(s) (NaN or inf) "
                    f"at joint action(s) {bad[:_MAX_SHOWN]}: {_show(bad, raw)}."
                )
            return
        bad_cells = [
            (j, i)
            for j, row in enumerate(scores.rows)
            for i, v in enumerate(row)
            if not math.isfinite(v)
        ]
        if bad_cells:
            shown = ", ".join(
                f"[{j}][{i}]={scores.rows[j][i]!r}" for j, i in bad_cells[:_MAX_SHOWN]
            )
            raise RewardError(
                f"Reward function {self._label!r} returned non-finite per-agent reward(s) (NaN or "
                f"inf) at [joint action][agent] {shown}."
            )

    def _process(self, scores: RewardScores) -> RewardScores:
        if self.reward_processor is None:
            return scores
        if not scores.per_agent:
            values = [self._apply(v, f"joint action [{j}]") for j, v in enumerate(scores.shared)]
            return RewardScores.from_shared(values, self.num_agents)
        rows = [
            [self._apply(v, f"[joint action][agent] [{j}][{i}]") for i, v in enumerate(row)]
            for j, row in enumerate(scores.rows)
        ]
        return RewardScores(rows, per_agent=True)

    def _apply(self, value: float, where: str) -> float:
        processor = self.reward_processor
        assert processor is not None  # _process applies it only when there is one
        out = processor(value)
        try:
            result = float(out)
        except (TypeError, ValueError) as exc:
            raise RewardError(
                f"reward_processor {self._processor_label!r} returned {out!r} for reward "
                f"{value!r} ({where}); it must return a number."
            ) from exc
        if not math.isfinite(result):
            raise RewardError(
                f"reward_processor {self._processor_label!r} produced a non-finite value for "
                f"reward function {self._label!r} at {where}: {value!r}->{result!r}."
            )
        return result
