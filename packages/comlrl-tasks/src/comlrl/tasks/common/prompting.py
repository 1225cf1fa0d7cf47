"""Turn a rendered task prompt into the string an agent's model sees."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from comlrl.core.config.validation import normalize_choice
from comlrl.core.rollout.chat import (
    check_system_prompt,
    has_chat_template,
    per_agent,
    render_chat,
    with_system_text,
)

CHAT_TEMPLATE_MODES = ("auto", "on", "off")
_CHAT_ALIASES = {"true": "on", "false": "off", "yes": "on", "no": "off"}


def chat_mode(value: Any, field: str = "task.options.chat_template") -> str:
    """Normalize the ``chat_template`` option (auto/on/off; YAML booleans allowed)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return normalize_choice(field, value, CHAT_TEMPLATE_MODES, _CHAT_ALIASES)


def tokenizer_for(tokenizer: Any, agent: int) -> Any:
    """The tokenizer of ``agent`` when one per agent was given, else the shared one."""
    if isinstance(tokenizer, (list, tuple)):
        if not tokenizer:
            return None
        return tokenizer[agent] if agent < len(tokenizer) else tokenizer[-1]
    return tokenizer


class AgentFormatter:
    """Formatter for one agent: dataset row -> prompt string.

    ``render(item)`` writes the task's instruction for this agent. With a chat template (option
    ``chat_template``: ``auto`` uses the tokenizer's template when it has one) the instruction
    becomes the user turn, after an optional system prompt, with the generation prompt appended;
    the result is a :class:`~comlrl.core.rollout.chat.ChatPrompt`, which the trainer encodes
    without adding special tokens again and does not template a second time. On later turns
    the trainer passes ``external_prompts`` (the transition's text for this agent), which
    replaces the rendered instruction and gets the same wrapping.
    """

    def __init__(
        self,
        render: Callable[[dict], str],
        *,
        tokenizer: Any = None,
        chat_template: Any = "auto",
        system_prompt: str | None = None,
        field: str = "task.options.chat_template",
    ):
        self.render = render
        self.tokenizer = tokenizer
        self.mode = chat_mode(chat_template, field)
        self.system_prompt = check_system_prompt(
            system_prompt, field.replace("chat_template", "system_prompt")
        )
        if self.mode == "on" and not has_chat_template(tokenizer):
            raise ValueError(
                f"{field} is on, but the agent's tokenizer has no chat template; use 'auto' "
                "or 'off'."
            )

    @property
    def templated(self) -> bool:
        """Whether this agent's prompts go through its tokenizer's chat template."""
        return self.mode != "off" and has_chat_template(self.tokenizer)

    def wrap(self, text: str) -> str:
        """Apply the chat template (if active) to an instruction text."""
        if not self.templated:
            return with_system_text(text, self.system_prompt)
        return render_chat(self.tokenizer, text, self.system_prompt)

    def __call__(self, item: dict, external_prompts: str | Sequence[str] | None = None) -> str:
        if external_prompts is None:
            return self.wrap(self.render(item))
        if not isinstance(external_prompts, str):
            raise ValueError(
                "external_prompts must be this agent's next-turn prompt string, got "
                f"{type(external_prompts).__name__}."
            )
        return self.wrap(external_prompts)


def build_formatters(
    renders: Sequence[Callable[[dict], str]], *, tokenizer: Any, options: dict[str, Any]
) -> list[AgentFormatter]:
    """One :class:`AgentFormatter` per agent from per-agent render functions and task options.

    ``tokenizer`` is one tokenizer or a list with one per agent; the options ``chat_template``
    and ``system_prompt`` are one value for every agent or a list with one per agent.
    """
    n = len(renders)
    modes = per_agent(options.get("chat_template", "auto"), n, "task.options.chat_template")
    systems = per_agent(options.get("system_prompt"), n, "task.options.system_prompt")
    return [
        AgentFormatter(
            render,
            tokenizer=tokenizer_for(tokenizer, agent),
            chat_template=modes[agent],
            system_prompt=systems[agent],
            field="task.options.chat_template" + (f"[{agent}]" if n > 1 else ""),
        )
        for agent, render in enumerate(renders)
    ]
