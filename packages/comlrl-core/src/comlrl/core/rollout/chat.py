"""Chat templates: wrapping an agent's prompt in its tokenizer's template, and encoding it once.

An instruct model expects its prompts in the conversation format its tokenizer's chat template
writes (role markers, a generation prompt, and often the BOS token). The template's output
already holds those special tokens, so it must be encoded with ``add_special_tokens=False``:
a Llama-3, Gemma or Mistral tokenizer would otherwise put a second BOS in front of the first.

The setting is per agent: ``"auto"`` uses the tokenizer's template when it has one, ``True``
requires one, ``False`` leaves the prompt as the formatter wrote it. An optional system prompt
becomes the conversation's system turn (without a template: a paragraph before the prompt).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

AUTO = "auto"
_TRUE = ("true", "on", "yes")
_FALSE = ("false", "off", "no")


class ChatPrompt(str):
    """A prompt string written by a chat template.

    It holds the special tokens the model expects (such as BOS), so :func:`encode_prompts`
    encodes it without adding any.
    """


def chat_setting(value: Any, field: str = "apply_chat_template") -> bool | str:
    """``"auto"``, ``True`` or ``False`` from a bool or a YAML-style string; else ValueError."""
    if isinstance(value, bool) or value == AUTO:
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == AUTO:
            return AUTO
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError(
        f"{field} must be 'auto', true or false (or a list of them, one per agent), got {value!r}."
    )


def check_system_prompt(value: Any, field: str = "system_prompt") -> str | None:
    """A system prompt is a string or None."""
    if value is not None and not isinstance(value, str):
        raise ValueError(
            f"{field} must be a string or null (or a list of them, one per agent), got {value!r}."
        )
    return value


def per_agent(value: Any, num_agents: int, field: str) -> list[Any]:
    """One setting for every agent, or a list (or tuple) with one entry per agent."""
    if isinstance(value, (list, tuple)):
        if len(value) != num_agents:
            raise ValueError(
                f"{field} has {len(value)} entries for {num_agents} agents; give one value for "
                "all agents or one per agent."
            )
        return list(value)
    return [value] * num_agents


def check_chat_settings(value: Any, field: str = "apply_chat_template") -> Any:
    """Normalize one chat setting or a list of them (their count is checked per trainer)."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"{field} must not be an empty list.")
        return [chat_setting(v, f"{field}[{i}]") for i, v in enumerate(value)]
    return chat_setting(value, field)


def check_system_prompts(value: Any, field: str = "system_prompt") -> Any:
    """One system prompt (or None) or a list of them."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"{field} must not be an empty list.")
        return [check_system_prompt(v, f"{field}[{i}]") for i, v in enumerate(value)]
    return check_system_prompt(value, field)


def has_chat_template(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` carries a chat template it can apply."""
    return bool(getattr(tokenizer, "chat_template", None)) and callable(
        getattr(tokenizer, "apply_chat_template", None)
    )


def uses_template(setting: bool | str, tokenizer: Any, field: str) -> bool:
    """Whether an agent with this setting and tokenizer gets its prompts templated."""
    if setting is True and not has_chat_template(tokenizer):
        raise ValueError(
            f"{field} is true, but the agent's tokenizer has no chat template; use 'auto' "
            "(template only where one exists) or false, or give a tokenizer with a template."
        )
    return setting is True or (setting == AUTO and has_chat_template(tokenizer))


def render_chat(tokenizer: Any, text: str, system_prompt: str | None = None) -> ChatPrompt:
    """``text`` as the user turn of a conversation (after ``system_prompt``, if given), with
    the generation prompt appended, as the tokenizer's template writes it."""
    messages = [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
    messages.append({"role": "user", "content": text})
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return ChatPrompt(rendered)


def with_system_text(text: str, system_prompt: str | None) -> str:
    """Without a template, a system prompt is a paragraph in front of the prompt."""
    return text if system_prompt is None else f"{system_prompt}\n\n{text}"


def adds_special_tokens(tokenizer: Any, prompt: str) -> bool:
    """Whether encoding ``prompt`` should add the tokenizer's special tokens: not for a
    templated prompt, nor for one that already starts with the BOS token."""
    if isinstance(prompt, ChatPrompt):
        return False
    bos = getattr(tokenizer, "bos_token", None)
    return not (isinstance(bos, str) and bos and prompt.startswith(bos))


def encode_prompts(tokenizer: Any, prompts: Sequence[str]) -> list[list[int]]:
    """Token ids of each prompt, each special token (BOS) present once.

    Prompts that need the tokenizer's special tokens and those that already hold them are
    encoded in one batched call each, and the ids come back in the prompts' order.
    """
    flags = [adds_special_tokens(tokenizer, p) for p in prompts]
    out: list[list[int]] = [[] for _ in prompts]
    for flag in (True, False):
        picked = [i for i, f in enumerate(flags) if f is flag]
        if not picked:
            continue
        ids = tokenizer([str(prompts[i]) for i in picked], add_special_tokens=flag)["input_ids"]
        for i, row in zip(picked, ids):
            out[i] = list(row)
    return out
