"""Calling a user reward function with the argument layout its signature asks for.

A reward function scores joint actions. It receives one list of completion strings per agent and
returns one reward per joint action, shared or per agent (see :mod:`comlrl.core.rewards.shapes`).
Its signature decides how the lists are handed over:

=========================================  ==========================================
signature (positional data parameters)     call made
=========================================  ==========================================
``*args``                                  ``f(c_0, ..., c_{N-1}, **kw)``
N == 1, one parameter                      ``f(c_0, **kw)``
N == 1, two parameters                     ``f(prompts, c_0, **kw)``
N > 1, N parameters                        ``f(c_0, ..., c_{N-1}, **kw)``
N > 1, N + 1 parameters                    ``f(prompts, c_0, ..., c_{N-1}, **kw)``
N > 1, one parameter                       ``f([c_0, ..., c_{N-1}], **kw)``
anything else                              ValueError
=========================================  ==========================================

"Data parameters" are the positional parameters whose name is neither ``prompts`` nor
``batch_items``: those two names are always filled by name, wherever they sit in the signature,
so ``def f(c1, c2, batch_items=None)`` is a two-agent reward that gets the real batch items.
``kw`` holds ``batch_items=`` when the function names that parameter or takes ``**kwargs``, and
``prompts=`` likewise unless the prompts already went in positionally.

Exceptions raised by the reward function are never caught here: there is no second attempt with a
different layout, so an error inside the user's code surfaces exactly as it was raised.
"""

from __future__ import annotations

import functools
import inspect
import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RewardError",
    "call_reward_function",
    "check_reward_signature",
    "describe_callable",
    "invoke_reward_function",
    "non_finite_indices",
    "normalize_reward_lengths",
    "receives_nested_lists",
]

_PROMPTS = "prompts"
_BATCH_ITEMS = "batch_items"
_SPECIAL_NAMES = (_PROMPTS, _BATCH_ITEMS)

_POSITIONAL_KINDS = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
)

_ACCEPTED_SIGNATURES = (
    "accepted reward signatures are f(*completions), one positional parameter per agent "
    "f(c_1, ..., c_N), a prompts list first f(prompts, c_1, ..., c_N), or (for N > 1) a single "
    "parameter receiving the list of per-agent lists f(all_completions); parameters named "
    "'prompts' and 'batch_items' are filled by name and do not count as positions"
)


class RewardError(ValueError):
    """A reward function (or its processor) produced values the trainer cannot use."""


def describe_callable(func: Any) -> str:
    """A short human-readable name for a reward function, processor or other callable."""
    if isinstance(func, functools.partial):
        return f"partial({describe_callable(func.func)})"
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    if isinstance(name, str) and name:
        return name
    return type(func).__name__


@dataclass(frozen=True)
class _Param:
    name: str
    positional_only: bool
    special: bool


@dataclass(frozen=True)
class _CallPlan:
    """How to lay out the arguments for one reward function at one agent count."""

    readable: bool
    # "variadic": completions spread over *args; "per_agent": one data parameter per agent;
    # "prompts_first": prompts in the first data slot, then one per agent;
    # "nested": a single data parameter receiving the list of per-agent lists.
    layout: str
    positional: tuple[_Param, ...]
    prompts_keyword: bool
    batch_items_keyword: bool
    var_keyword: bool
    named_specials: frozenset[str]


_UNREADABLE = _CallPlan(
    readable=False,
    layout="variadic",
    positional=(),
    prompts_keyword=False,
    batch_items_keyword=False,
    var_keyword=False,
    named_specials=frozenset(),
)

# Keyed weakly by the function so that caching never keeps a reward (and whatever it closes
# over, possibly a model) alive after the trainer has dropped it.
_PLAN_CACHE: weakref.WeakKeyDictionary[Any, dict[int, _CallPlan]] = weakref.WeakKeyDictionary()


def _build_plan(reward_func: Callable, num_agents: int) -> _CallPlan:
    try:
        signature = inspect.signature(reward_func)
    except (TypeError, ValueError):
        return _UNREADABLE

    params = list(signature.parameters.values())
    var_positional = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    var_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    names = {p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD}
    positional = tuple(
        _Param(
            name=p.name,
            positional_only=p.kind is inspect.Parameter.POSITIONAL_ONLY,
            special=p.name in _SPECIAL_NAMES,
        )
        for p in params
        if p.kind in _POSITIONAL_KINDS
    )
    label = describe_callable(reward_func)

    missing = [
        p.name
        for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY
        and p.default is inspect.Parameter.empty
        and p.name not in _SPECIAL_NAMES
    ]
    if missing:
        raise ValueError(
            f"Reward function {label!r} has required keyword-only parameter(s) {missing} that "
            "the trainer cannot fill; give them defaults or bind them with functools.partial."
        )

    n_data = sum(1 for p in positional if not p.special)
    if var_positional:
        layout = "variadic"
    elif num_agents == 1 and n_data == 1:
        layout = "per_agent"
    elif num_agents == 1 and n_data == 2:
        layout = "prompts_first"
    elif num_agents > 1 and n_data == num_agents:
        layout = "per_agent"
    elif num_agents > 1 and n_data == num_agents + 1:
        layout = "prompts_first"
    elif num_agents > 1 and n_data == 1:
        layout = "nested"
    else:
        raise ValueError(
            f"Reward function {label!r} has {n_data} positional parameter(s) (not counting "
            f"'prompts'/'batch_items') and cannot be called for num_agents={num_agents}: "
            f"{_ACCEPTED_SIGNATURES}."
        )

    return _CallPlan(
        readable=True,
        layout=layout,
        positional=positional,
        prompts_keyword=layout != "prompts_first" and (_PROMPTS in names or var_keyword),
        batch_items_keyword=_BATCH_ITEMS in names or var_keyword,
        var_keyword=var_keyword,
        named_specials=frozenset(names & set(_SPECIAL_NAMES)),
    )


def _plan_for(reward_func: Callable, num_agents: int) -> _CallPlan:
    try:
        per_func = _PLAN_CACHE.get(reward_func)
    except TypeError:
        # Unhashable or not weak-referenceable callables are simply analysed on every call.
        return _build_plan(reward_func, num_agents)
    if per_func is not None and num_agents in per_func:
        return per_func[num_agents]
    plan = _build_plan(reward_func, num_agents)
    try:
        _PLAN_CACHE.setdefault(reward_func, {})[num_agents] = plan
    except TypeError:
        return plan
    return plan


def receives_nested_lists(reward_func: Callable, num_agents: int) -> bool:
    """Whether ``reward_func`` gets every agent's completions as one list of lists (a single
    data parameter with several agents: the layout a TRL-style reward falls into)."""
    plan = _plan_for(reward_func, num_agents)
    return plan.readable and plan.layout == "nested"


def _check_num_agents(num_agents: Any) -> int:
    if isinstance(num_agents, bool) or not isinstance(num_agents, int) or num_agents < 1:
        raise ValueError(f"num_agents must be a positive integer, got {num_agents!r}.")
    return num_agents


def _arguments(
    plan: _CallPlan,
    agent_completions: list[list[str]],
    prompts: list[str] | None,
    batch_items: list | None,
) -> tuple[list[Any], dict[str, Any]]:
    specials = {_PROMPTS: prompts, _BATCH_ITEMS: batch_items}
    keyword_specials: set[str] = set()
    if plan.prompts_keyword:
        keyword_specials.add(_PROMPTS)
    if plan.batch_items_keyword:
        keyword_specials.add(_BATCH_ITEMS)

    if plan.layout in ("variadic", "per_agent"):
        data: list[Any] = list(agent_completions)
    elif plan.layout == "prompts_first":
        data = [prompts, *agent_completions]
    else:
        data = [list(agent_completions)]

    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    remaining = iter(data)
    # Once a named special parameter is skipped or given by keyword, the positional slots after
    # it can no longer be filled by position without colliding with it.
    by_position = True
    for param in plan.positional:
        if param.special:
            if param.positional_only or plan.layout == "variadic":
                # Positional-only, or in front of *args: only a positional value can reach it.
                args.append(specials[param.name])
                keyword_specials.discard(param.name)
            elif param.name in keyword_specials:
                kwargs[param.name] = specials[param.name]
                keyword_specials.discard(param.name)
                by_position = False
            else:
                by_position = False
            continue
        try:
            value = next(remaining)
        except StopIteration:
            break
        if by_position:
            args.append(value)
        else:
            kwargs[param.name] = value
    if plan.layout == "variadic":
        args.extend(remaining)

    for name in sorted(keyword_specials):
        value = specials[name]
        # A bare **kwargs only hears about values that were actually supplied; a parameter
        # that names them always gets one (None when the caller had none).
        if value is not None or name in plan.named_specials:
            kwargs[name] = value
    return args, kwargs


def _coerce(result: Any, label: str) -> list[float]:
    if isinstance(result, (str, bytes)):
        raise RewardError(
            f"Reward function {label!r} returned a string ({result!r}); it must return numbers."
        )
    if hasattr(result, "tolist") and callable(result.tolist):
        # torch tensors, numpy arrays and numpy scalars; no torch import needed here.
        result = result.tolist()
    values = list(result) if isinstance(result, (list, tuple)) else [result]
    out: list[float] = []
    for index, value in enumerate(values):
        if isinstance(value, (str, bytes)):
            raise RewardError(
                f"Reward function {label!r} returned a non-numeric value {value!r} at index "
                f"{index}; every reward must be a number."
            )
        try:
            out.append(float(value))
        except (TypeError, ValueError) as exc:
            raise RewardError(
                f"Reward function {label!r} returned a value that is not a number: {value!r} "
                f"(index {index}, type {type(value).__name__})."
            ) from exc
    return out


def call_reward_function(
    reward_func: Callable,
    agent_completions: list[list[str]],
    *,
    num_agents: int,
    prompts: list[str] | None = None,
    batch_items: list | None = None,
) -> list[float]:
    """Call ``reward_func`` once with the layout its signature asks for; return its floats.

    ``agent_completions[i]`` is agent ``i``'s list of completions. The result is coerced to a
    flat ``list[float]`` (tensors and arrays via ``tolist``, tuples to lists, a bare number to a
    one-element list); something that is not a number raises :class:`RewardError`. The count and
    finiteness of the values are not checked here — :class:`RewardCaller` does that.

    Anything the reward function raises propagates unchanged; it is called exactly once.
    """
    result = invoke_reward_function(
        reward_func,
        agent_completions,
        num_agents=num_agents,
        prompts=prompts,
        batch_items=batch_items,
    )
    return _coerce(result, describe_callable(reward_func))


def invoke_reward_function(
    reward_func: Callable,
    agent_completions: list[list[str]],
    *,
    num_agents: int,
    prompts: list[str] | None = None,
    batch_items: list | None = None,
) -> Any:
    """Call ``reward_func`` once with the layout its signature asks for; return its result as
    it came (no coercion), so callers can read per-agent rows. Exceptions propagate unchanged."""
    num_agents = _check_num_agents(num_agents)
    if len(agent_completions) != num_agents:
        raise ValueError(
            f"agent_completions holds {len(agent_completions)} per-agent lists but "
            f"num_agents={num_agents}."
        )
    plan = _plan_for(reward_func, num_agents)
    if not plan.readable:
        return reward_func(*agent_completions)
    args, kwargs = _arguments(plan, agent_completions, prompts, batch_items)
    return reward_func(*args, **kwargs)


def check_reward_signature(reward_func: Callable, *, num_agents: int) -> None:
    """Raise ValueError now if ``reward_func`` cannot be dispatched for ``num_agents`` agents."""
    _plan_for(reward_func, _check_num_agents(num_agents))


def non_finite_indices(values: Sequence[float]) -> list[int]:
    """Indices of NaN or infinite entries."""
    return [i for i, v in enumerate(values) if not math.isfinite(v)]


def normalize_reward_lengths(
    rewards: list[float], *, num_agents: int, num_generations: int
) -> list[float]:
    """Bring one prompt's rewards to ``num_generations`` values.

    A single value is shared by every generation; exactly ``num_generations`` values are returned
    unchanged (as a new list of floats). Any other length is a ValueError.
    """
    num_agents = _check_num_agents(num_agents)
    if (
        isinstance(num_generations, bool)
        or not isinstance(num_generations, int)
        or num_generations < 1
    ):
        raise ValueError(f"num_generations must be a positive integer, got {num_generations!r}.")
    values = [float(r) for r in rewards]
    if len(values) == 1:
        return values * num_generations
    if len(values) == num_generations:
        return values
    raise ValueError(
        "Reward function must return either 1 or N values per prompt (N = num_generations = "
        f"{num_generations}); got {len(values)} values (num_agents = {num_agents})."
    )
