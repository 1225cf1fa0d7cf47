"""Turn a rendered task prompt into the string an agent's model sees."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from comlrl.core.config.validation import normalize_choice

CHAT_TEMPLATE_MODES = ("auto", "on", "off")
_CHAT_ALIASES = {"true": "on", "false": "off", "yes": "on", "no": "off"}


def chat_mode(value: Any) -> str:
    """Normalize the ``chat_template`` option (auto/on/off; YAML booleans allowed)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return normalize_choice("task.options.chat_template", value, CHAT_TEMPLATE_MODES, _CHAT_ALIASES)


def tokenizer_for(tokenizer: Any, agent: int) -> Any:
    """The tokenizer of ``agent`` when one per agent was given, else the shared one."""
    if isinstance(tokenizer, (list, tuple)):
        if not tokenizer:
            return None
        return tokenizer[agent] if agent < len(tokenizer) else tokenizer[-1]
    return tokenizer


def _has_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None)) and hasattr(
        tokenizer, "apply_chat_template"
    )


class AgentFormatter:
    """Formatter for one agent: dataset row -> prompt string.

    ``render(item)`` writes the task's instruction for this agent. With a chat template (option
    ``chat_template``: ``auto`` uses the tokenizer's template when it has one) the instruction
    becomes the user turn, after an optional system prompt, with the generation prompt appended.
    On later turns the trainer passes ``external_prompts`` (the transition's text for this agent),
    which replaces the rendered instruction and gets the same wrapping.
    """

    def __init__(
        self,
        render: Callable[[dict], str],
        *,
        tokenizer: Any = None,
        chat_template: Any = "auto",
        system_prompt: str | None = None,
    ):
        self.render = render
        self.tokenizer = tokenizer
        self.mode = chat_mode(chat_template)
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ValueError(
                f"task.options.system_prompt must be a string or null, got {system_prompt!r}."
            )
        self.system_prompt = system_prompt
        if self.mode == "on" and not _has_template(tokenizer):
            raise ValueError(
                "task.options.chat_template is on, but the agent's tokenizer has no "
                "chat template; use 'auto' or 'off'."
            )

    def wrap(self, text: str) -> str:
        """Apply the chat template (if active) to an instruction text."""
        if self.mode == "off" or not _has_template(self.tokenizer):
            return text if self.system_prompt is None else f"{self.system_prompt}\n\n{text}"
        messages = (
            []
            if self.system_prompt is None
            else [{"role": "system", "content": self.system_prompt}]
        )
        messages.append({"role": "user", "content": text})
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )

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
    """One :class:`AgentFormatter` per agent from per-agent render functions and task options."""
    return [
        AgentFormatter(
            render,
            tokenizer=tokenizer_for(tokenizer, agent),
            chat_template=options.get("chat_template", "auto"),
            system_prompt=options.get("system_prompt"),
        )
        for agent, render in enumerate(renders)
    ]
