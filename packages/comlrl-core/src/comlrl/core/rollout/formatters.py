"""Formatters: one callable per agent that turns a dataset row into that agent's prompt."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from comlrl.core.rollout.chat import (
    ChatPrompt,
    per_agent,
    render_chat,
    uses_template,
    with_system_text,
)


def _default_formatter(item: dict, external_prompts: str | None = None) -> str:
    if external_prompts is not None:
        return external_prompts
    return str(item.get("prompt", ""))


def _accepts(func: Callable, name: str) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class Formatter:
    """Wraps a user formatter and implements the multi-turn prompt contract.

    Turn 0: ``f(item)``. Later turns get an external prompt (from the transition): if ``f``
    takes ``external_prompts`` it is called as ``f(item, external_prompts=ext)``; otherwise it is
    called on a copy of the item whose ``prompt`` is replaced by the external prompt (the original
    stays under ``_original_prompt``).
    """

    def __init__(self, func: Callable[..., str]):
        if not callable(func):
            raise ValueError(f"formatters entries must be callable, got {func!r}.")
        self.func = func
        self.takes_external = _accepts(func, "external_prompts")

    def __call__(self, item: dict, external_prompt: str | None = None) -> str:
        if external_prompt is None:
            result = self.func(item)
        elif self.takes_external:
            result = self.func(item, external_prompts=external_prompt)
        else:
            patched = dict(item)
            patched["_original_prompt"] = item.get("prompt", "")
            patched["prompt"] = external_prompt
            result = self.func(patched)
        if not isinstance(result, str):
            raise ValueError(
                f"formatter {getattr(self.func, '__qualname__', self.func)!r} must return a str, "
                f"got {type(result).__name__}."
            )
        return result


def build_formatters(formatters: Any, num_agents: int) -> list[Formatter]:
    """``None`` → read ``item["prompt"]``; one callable → shared; a list → one per agent."""
    if formatters is None:
        return [Formatter(_default_formatter) for _ in range(num_agents)]
    if callable(formatters):
        return [Formatter(formatters)] * num_agents
    if isinstance(formatters, Sequence) and not isinstance(formatters, (str, bytes)):
        if len(formatters) != num_agents:
            raise ValueError(
                f"Number of formatters ({len(formatters)}) must match num_agents ({num_agents}) "
                "when providing a sequence."
            )
        return [Formatter(f) for f in formatters]
    raise ValueError("formatters must be None, a callable, or a sequence of callables.")


class TemplatedFormatter(Formatter):
    """A formatter whose prompts are wrapped in the agent's chat template (see
    :mod:`comlrl.core.rollout.chat`). A prompt the inner formatter already templated (a task
    formatter given the tokenizer) is passed on as it is, so nothing is templated twice."""

    def __init__(self, inner: Formatter, tokenizer: Any, template: bool, system_prompt):
        self.inner, self.tokenizer = inner, tokenizer
        self.template, self.system_prompt = template, system_prompt
        self.func, self.takes_external = inner.func, inner.takes_external

    def __call__(self, item: dict, external_prompt: str | None = None) -> str:
        text = self.inner(item, external_prompt)
        if isinstance(text, ChatPrompt):
            return text
        if self.template:
            return render_chat(self.tokenizer, text, self.system_prompt)
        return with_system_text(text, self.system_prompt)


def template_formatters(
    formatters: Sequence[Formatter], tokenizers: Sequence[Any], args: Any
) -> list[Formatter]:
    """Apply the config's ``apply_chat_template`` and ``system_prompt`` (each one value for
    every agent or a list, one per agent) to the agents' formatters. Agents with neither a
    template nor a system prompt keep their formatter unchanged."""
    n = len(formatters)
    settings = per_agent(getattr(args, "apply_chat_template", False), n, "apply_chat_template")
    systems = per_agent(getattr(args, "system_prompt", None), n, "system_prompt")
    out: list[Formatter] = []
    for i, (fmt, tok, setting, system) in enumerate(zip(formatters, tokenizers, settings, systems)):
        template = uses_template(setting, tok, f"apply_chat_template (agent {i})")
        out.append(
            fmt
            if not template and system is None
            else TemplatedFormatter(fmt, tok, template, system)
        )
    return out
