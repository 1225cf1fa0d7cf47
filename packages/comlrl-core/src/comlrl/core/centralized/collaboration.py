"""Centralized collaboration: one model writes every role's output in a single completion.

An *adapter* turns the roles' own prompts into one joint prompt and splits the joint completion
back into one output per role. The multi-agent task reward is then called on the split outputs,
unchanged. Both the REINFORCE family (CentralizedMAGRPO) and the preference family (centralized
actors and comparators) use this module, so a malformed joint completion is handled the same way
everywhere: it counts as a parse failure, every role gets an empty output, and the failure count
is logged.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from comlrl.core.centralized.layout import (
    ParsedLayout,
    check_parse_mode,
    parse_lenient,
    parse_strict,
)
from comlrl.core.rewards.caller import RewardCaller
from comlrl.core.rewards.ranges import get_reward_range


class CentralizedComparatorParseError(ValueError):
    """An adapter could not find any role output in a joint completion."""


@runtime_checkable
class CentralizedComparatorAdapter(Protocol):
    """What a centralized adapter provides.

    ``build_prompt(batch_item, agent_prompts)`` returns the joint prompt, and
    ``parse_completion(completion, batch_item, num_agents)`` returns one string per role, or raises
    :class:`CentralizedComparatorParseError` when the completion holds no usable output.
    """

    def build_prompt(self, batch_item: Any, agent_prompts: Sequence[str]) -> str: ...

    def parse_completion(
        self, completion: str, batch_item: Any, num_agents: int
    ) -> Sequence[str]: ...


@dataclass(frozen=True)
class TaggedCentralizedComparatorAdapter:
    """Asks for ``<agent_i>`` sections (0-based), one per role, and reads them back.

    Args:
        tag: the tag name (``agent`` gives ``<agent_0>``, ``<agent_1>``, ...).
        mode: ``strict`` (the default, as in CoMLRL 1.4.3) asks for closed
            ``<agent_i>...</agent_i>`` blocks and reads only closed blocks. ``lenient`` ends the
            prompt with role 0's opening tag, so the completion starts inside role 0's section,
            and reads sections loosely (any case and spacing, closing tags optional, see
            :func:`~comlrl.core.centralized.layout.parse_lenient`); a reward ``R`` then earns
            ``low + f·(R - low)``, ``f`` the share of roles whose section was produced and
            ``low`` the reward's declared lower bound (0 when it declares none, see
            :attr:`credits_layout`).

    A role whose section is missing reads as ``""``. A completion without a single section raises
    :class:`CentralizedComparatorParseError`.
    """

    tag: str = "agent"
    mode: str = "strict"

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", check_parse_mode(self.mode, "adapter mode"))

    @property
    def credits_layout(self) -> bool:
        """Whether a joint reward is scaled by the share of the layout that was produced."""
        return self.mode == "lenient"

    @property
    def opens_first_section(self) -> bool:
        """Whether the prompt ends with role 0's opening tag (the completion continues it)."""
        return self.mode == "lenient"

    def build_prompt(self, batch_item: Any, agent_prompts: Sequence[str]) -> str:
        """The coordinator prompt: every role's prompt, then the required output layout."""
        n, t = len(agent_prompts), self.tag
        lenient = self.mode == "lenient"
        block = f"<{t}_i>...</{t}_i> block" if not lenient else f"<{t}_i> section"
        lines = [
            f"You coordinate a team of {n} agents and write the output of every agent yourself.",
            f"Write each agent's output inside its own {block} and put nothing outside them.",
            "",
        ]
        for i, prompt in enumerate(agent_prompts):
            lines += [f"Task of agent {i}:", str(prompt), ""]
        if not lenient:
            lines.append("Answer in exactly this layout:")
            lines += [f"<{t}_{i}>\n...\n</{t}_{i}>" for i in range(n)]
            return "\n".join(lines)
        lines.append("Answer in this layout (closing tags are optional):")
        lines += [f"<{t}_{i}>\n..." for i in range(n)]
        # The answer starts inside role 0's section: the writer only has to continue it.
        lines += ["", f"<{t}_0>", ""]
        return "\n".join(lines)

    def parse_layout(self, completion: str, batch_item: Any, num_agents: int) -> ParsedLayout:
        """Every role's output and whether its section was produced (never raises)."""
        if self.mode == "strict":
            return parse_strict(completion, self.tag, num_agents)
        return parse_lenient(completion, self.tag, num_agents, first_opened=True)

    def parse_completion(self, completion: str, batch_item: Any, num_agents: int) -> list[str]:
        """One output per role; raises when no role section is present at all."""
        layout = self.parse_layout(completion, batch_item, num_agents)
        if not any(layout.produced):
            raise CentralizedComparatorParseError(
                f"no <{self.tag}_i> section found in the joint completion "
                f"(expected {num_agents} sections)."
            )
        return layout.outputs

    def format_completion(self, outputs: Sequence[str]) -> str:
        """The joint completion this adapter parses back into ``outputs`` (in lenient mode, the
        text that continues the prompt's opened first section)."""
        t = self.tag
        if self.mode == "strict":
            return "\n".join(f"<{t}_{i}>\n{o}\n</{t}_{i}>" for i, o in enumerate(outputs))
        parts = [str(outputs[0])] if outputs else []
        parts += [f"<{t}_{i}>\n{o}" for i, o in enumerate(outputs) if i > 0]
        return "\n".join(parts)


def check_adapter(adapter: Any, name: str = "centralized_adapter") -> Any:
    """Require callable ``build_prompt`` and ``parse_completion``; TypeError otherwise."""
    for method in ("build_prompt", "parse_completion"):
        if not callable(getattr(adapter, method, None)):
            raise TypeError(f"{name}.{method} must be callable.")
    return adapter


class LayoutWindow:
    """Per-step layout rates: joint completions split since the last :meth:`flush`.

    ``centralized/parse_failure_rate`` is the share of them whose layout was incomplete (at
    least one role's section missing or empty, so a completion with no section at all counts
    too), and ``centralized/layout_fraction`` their mean share of roles produced.
    """

    def __init__(self) -> None:
        self.count, self.incomplete, self.fraction_sum = 0, 0, 0.0

    def record(self, fraction: float) -> None:
        """Count one split joint completion that produced ``fraction`` of the roles."""
        self.count += 1
        self.incomplete += fraction < 1.0
        self.fraction_sum += fraction

    def flush(self) -> dict[str, float]:
        """The rates since the last flush (nothing when no completion was split), then reset."""
        if not self.count:
            return {}
        out = {
            "centralized/parse_failure_rate": self.incomplete / self.count,
            "centralized/layout_fraction": self.fraction_sum / self.count,
        }
        self.count, self.incomplete, self.fraction_sum = 0, 0, 0.0
        return out


class CentralizedCollaboration:
    """Binds an adapter to the roles' formatters (and optionally the task reward).

    Args:
        adapter: a :class:`CentralizedComparatorAdapter`.
        role_formatters: one callable per role, ``item -> prompt``.
        num_roles: the number of roles the joint completion holds.
        reward_func: the multi-agent task reward; needed only to use this object as the joint
            actor's reward (``__call__``).
        reward_call_mode: passed to the :class:`RewardCaller` of the task reward.

    With an adapter whose ``credits_layout`` is true (the lenient tagged adapter), a joint
    reward ``R`` earns ``low + f·(R - low)``: ``f`` is the share of roles whose section the
    completion produced and ``low`` the task reward's declared ``reward_range`` low (a task with
    negative rewards, e.g. tool use -0.4..1.1, must declare one; without one, ``low`` is 0 and a
    negative reward raises). A missing role never raises the reward, and an unreadable
    completion earns ``low``.

    Attributes:
        parse_failures: joint completions that held no role section (each scored as all-empty).
        parsed: joint completions split so far.
        role_reward_means: each role's mean reward in the last scored batch when the task reward
            gives per-role values (logged as ``centralized/role_{r}_reward_mean``), else None.
    """

    def __init__(
        self,
        adapter: Any,
        role_formatters: Sequence[Callable[[dict], str]],
        num_roles: int,
        reward_func: Callable | None = None,
        reward_call_mode: str = "auto",
    ):
        self.adapter = check_adapter(adapter)
        if len(role_formatters) != num_roles:
            raise ValueError(
                f"formatters: centralized collaboration needs one formatter per role "
                f"({num_roles}), got {len(role_formatters)}."
            )
        self.role_formatters = list(role_formatters)
        self.num_roles = num_roles
        self.parse_failures = 0
        self.parsed = 0
        self.role_reward_means: list[float] | None = None
        self.last_fractions: list[float] = []
        self.layout_window = LayoutWindow()
        # Set by a trainer to count only training rollouts in the per-step rates.
        self.recording: Callable[[], bool] | None = None
        self.task_reward = reward_func
        self._caller = None
        self.reward_range = None
        if reward_func is not None:
            if not callable(reward_func):
                raise ValueError("reward_func must be callable.")
            self.reward_range = get_reward_range(reward_func)
            self._caller = RewardCaller(
                reward_func, num_agents=num_roles, call_mode=reward_call_mode
            )

    # ------------------------------------------------------------------ prompts
    def role_prompts(self, item: dict) -> list[str]:
        """Each role's own prompt for ``item``."""
        return [f(item) for f in self.role_formatters]

    def build_prompt(self, item: dict) -> str:
        """The joint prompt for ``item``; must be a non-empty string."""
        prompt = self.adapter.build_prompt(item, self.role_prompts(item))
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("Centralized adapter must build a non-empty prompt.")
        return prompt

    # ------------------------------------------------------------------ splitting
    def _layout(self, completion: str, item: Any) -> ParsedLayout:
        parse_layout = getattr(self.adapter, "parse_layout", None)
        if callable(parse_layout):
            layout = parse_layout(completion, item, self.num_roles)
            if not any(layout.produced):
                raise CentralizedComparatorParseError("no role section in the joint completion.")
            return layout
        outputs = self.adapter.parse_completion(completion, item, self.num_roles)
        if isinstance(outputs, (str, bytes)):
            raise TypeError(
                "Centralized adapter parse_completion must return a sequence of strings, "
                "not a single string."
            )
        outputs = list(outputs)
        return ParsedLayout(outputs, [True] * len(outputs))

    def split(self, completion: str, item: Any) -> list[str]:
        """Role outputs of one joint completion; a parse failure is counted, never raised."""
        self.parsed += 1
        try:
            layout = self._layout(completion, item)
        except CentralizedComparatorParseError:
            self.parse_failures += 1
            layout = ParsedLayout([""] * self.num_roles, [False] * self.num_roles)
        outputs = layout.outputs
        if len(outputs) != self.num_roles:
            raise ValueError(
                f"Centralized adapter must return exactly {self.num_roles} outputs, "
                f"got {len(outputs)}."
            )
        if not all(isinstance(o, str) for o in outputs):
            raise TypeError("Centralized adapter outputs must all be strings.")
        self.last_fractions.append(layout.fraction)
        if self.recording is None or self.recording():
            self.layout_window.record(layout.fraction)
        return outputs

    def split_many(self, completions: Sequence[str], items: Sequence[Any]) -> list[list[str]]:
        """``[role][j]`` outputs of joint completions ``j`` (items broadcast when length 1)."""
        items = list(items)
        if len(items) == 1 and len(completions) != 1:
            items = items * len(completions)
        if len(items) != len(completions):
            raise ValueError(
                f"batch_items has {len(items)} entries for {len(completions)} joint completions; "
                "give one item per completion (or a single item)."
            )
        per_role: list[list[str]] = [[] for _ in range(self.num_roles)]
        self.last_fractions = []
        for completion, item in zip(completions, items):
            for r, text in enumerate(self.split(completion, item)):
                per_role[r].append(text)
        return per_role

    def stats(self) -> dict[str, float]:
        """Parse counters for logging, with the rates of the joint completions split since the
        last call (see :class:`LayoutWindow`)."""
        out = {
            "centralized/parse_failures": float(self.parse_failures),
            "centralized/parsed": float(self.parsed),
        }
        out.update(self.layout_window.flush())
        if self.role_reward_means is not None:
            for r, value in enumerate(self.role_reward_means):
                out[f"centralized/role_{r}_reward_mean"] = float(value)
        return out

    # ------------------------------------------------------------------ joint reward
    def __call__(self, completions: Sequence[str], *, prompts=None, batch_items=None) -> list:
        """One task reward per joint completion: split into roles, then score the roles (a
        reward that gives each role its own value is credited with the roles' mean)."""
        if self._caller is None:
            raise ValueError("This collaboration was built without a reward_func.")
        if not batch_items:
            raise ValueError("Centralized rewards need batch_items (one per joint completion).")
        per_role = self.split_many(list(completions), batch_items)
        items = list(batch_items)
        if len(items) == 1 and len(completions) != 1:
            items = items * len(completions)
        role_prompts = [self.role_formatters[0](item) for item in items]
        scores = self._caller.score(per_role, prompts=role_prompts, batch_items=items)
        credit = self.last_fractions if getattr(self.adapter, "credits_layout", False) else None
        # One actor writes every role, so its reward is the team's: with per-role values, their
        # mean. Each role's own mean is kept for the logs.
        if scores.per_agent:
            self.role_reward_means = [
                sum(scores.agent(r)) / len(scores) for r in range(self.num_roles)
            ]
        if credit is None:
            return scores.shared
        # Partial credit: only the produced share f of the layout earns its reward above the
        # floor, low + f·(R - low), so a dropped role never raises the reward, also where
        # rewards can be negative, and an unreadable answer earns the floor.
        low = self._credit_floor(scores.shared)
        return [low + f * (float(v) - low) for v, f in zip(scores.shared, credit)]

    def _credit_floor(self, rewards: Sequence[float]) -> float:
        """The lowest reward, from which partial credit is measured: the task reward's declared
        ``reward_range`` low, else 0.0, which is safe only while rewards are non-negative (a
        negative one raises rather than reward dropping roles)."""
        if self.reward_range is not None:
            return self.reward_range[0]
        negative = [v for v in rewards if float(v) < 0.0]
        if negative:
            raise ValueError(
                f"lenient centralized parsing scales a reward by the share of roles produced, "
                f"measured from the reward's lowest value, but reward_func declares no "
                f"reward_range and returned {float(negative[0])!r} < 0. Declare its range with "
                "comlrl.core.rewards.ranges.set_reward_range(reward_func, low, high)."
            )
        return 0.0

    # ------------------------------------------------------------------ eval
    def wrap_eval_logger(self, eval_logger: Callable | None) -> Callable | None:
        """An eval logger that sees ``[role][item][turn]`` outputs like a decentralized run."""
        if eval_logger is None:
            return None

        def split_logger(*, agent_completions_turns, batch_items, prompts, **kwargs):
            if len(agent_completions_turns) != 1:
                raise ValueError("Centralized eval expects exactly one actor's completions.")
            per_item = agent_completions_turns[0]
            roles: list[list[list[str]]] = [[] for _ in range(self.num_roles)]
            for item, turns in zip(batch_items, per_item):
                split_turns = [self.split(text, item) for text in turns]
                for r in range(self.num_roles):
                    roles[r].append([outs[r] for outs in split_turns])
            return eval_logger(
                agent_completions_turns=roles, batch_items=batch_items, prompts=prompts, **kwargs
            )

        return split_logger


def centralize(inputs: Any, args: Any, adapter: Any) -> tuple[Any, Any, CentralizedCollaboration]:
    """Rewrite a multi-agent run as one actor that writes every role (the environment seen
    through a :class:`CentralizedCollaboration`).

    ``inputs`` are the trainer's inputs for ``args.num_agents`` roles (default: the inputs'
    ``num_agents``, else 2). Returns the one-actor inputs (its formatter builds the joint
    prompt, its reward splits the joint completion and scores the roles, its eval logger sees
    the split outputs), the actor's config (a copy whose ``num_agents`` is unset, since the
    trainer counts one actor) and the collaboration itself.
    """
    roles = args.num_agents if args.num_agents is not None else (inputs.num_agents or 2)
    if inputs.num_agents is not None and inputs.num_agents != roles:
        raise ValueError(
            f"num_agents ({inputs.num_agents}) must match args.num_agents ({roles}), the role "
            "count, in centralized collaboration."
        )
    agents = inputs.agents
    if agents is not None and (isinstance(agents, (str, bytes)) or len(agents) != 1):
        raise ValueError("Centralized collaboration requires exactly one actor model (agents).")
    tokenizer = inputs.tokenizer
    if isinstance(tokenizer, (list, tuple)):
        if len(tokenizer) != 1:
            raise ValueError("Centralized collaboration requires one actor tokenizer.")
        tokenizer = tokenizer[0]
    if inputs.reward_func is None or not callable(inputs.reward_func):
        raise ValueError("reward_func must be a callable.")
    from comlrl.core.rollout.formatters import build_formatters

    collaboration = CentralizedCollaboration(
        adapter,
        build_formatters(inputs.formatters, roles),
        roles,
        inputs.reward_func,
        reward_call_mode=args.reward_call_mode,
    )
    actor_args = copy.copy(args)
    actor_args.num_agents = None
    actor_inputs = inputs.replace(
        num_agents=1,
        tokenizer=tokenizer,
        reward_func=collaboration,
        formatters=[collaboration.build_prompt],
        eval_logger=collaboration.wrap_eval_logger(inputs.eval_logger),
        args=actor_args,
    )
    return actor_inputs, actor_args, collaboration
