"""Small helpers that CoMLRL 1.4.3 offered as public functions and that the trainers here do
not need themselves; kept so scripts written against 1.4.3 run unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from comlrl.core.models import ensure_pad_token, is_model_name


def ensure_tokenizer(model: Any, tokenizer: Any = None) -> Any:
    """The given tokenizer (or one loaded for the model name ``model``), with a pad token set.

    A model object carries no reliable hub name, so it needs an explicit tokenizer.
    """
    if tokenizer is None:
        if not is_model_name(model):
            raise ValueError(
                "tokenizer must be given when model is not a model name or path "
                f"(got {type(model).__name__})."
            )
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(model))
    ensure_pad_token(tokenizer)
    return tokenizer


def apply_tokenizer_specials(tokenizer: Any, models: Sequence[Any]) -> None:
    """Copy the tokenizer's pad and EOS ids into each model's config (None entries skipped).

    Generation reads these ids from the model config, so a tokenizer whose pad token was set
    after loading would otherwise pad with a different id than the one it decodes.
    """
    ensure_pad_token(tokenizer)
    pad_id = tokenizer.pad_token_id
    eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else pad_id
    for model in models:
        if model is None:
            continue
        # Wrappers such as a value-head model keep the language model under ``.model``.
        inner = getattr(model, "model", None)
        config = getattr(inner, "config", None) or getattr(model, "config", None)
        if config is None:
            continue
        config.pad_token_id = pad_id
        config.eos_token_id = eos_id


def verbose_from_wandb_config(wandb_config: Any) -> bool:
    """``wandb_config["config_sections"]["output"]["verbose"]`` as a bool; True when unset."""
    if not isinstance(wandb_config, dict):
        return True
    sections = wandb_config.get("config_sections")
    output = sections.get("output") if isinstance(sections, dict) else None
    if isinstance(output, dict) and "verbose" in output:
        return bool(output["verbose"])
    return True


def reference_kl_enabled(args: Any) -> bool:
    """Whether a trainer config asks for the reference-KL term (False when it has no field)."""
    return bool(getattr(args, "reference_kl_enabled", False))


def reference_kl_coef(args: Any) -> float:
    """The reference-KL coefficient of a trainer config (0.1, 1.4.3's default, when absent)."""
    return float(getattr(args, "reference_kl_coef", 0.1))


def call_reward_function_compat(
    reward_func: Any,
    prompts: Sequence[str] | None,
    agent_completions: Sequence[Sequence[str]],
    *,
    num_agents: int,
    batch_items: Sequence[Any] | None = None,
    signature: Any = None,
) -> list[float]:
    """1.4.3's argument order for :func:`comlrl.core.rewards.call_reward_function`.

    ``signature`` (1.4.3's pre-computed ``inspect.Signature``) is accepted and not needed: the
    layout is read from ``reward_func`` itself. Unlike 1.4.3, the reward function is called once;
    a ``TypeError`` it raises is not retried with other argument layouts.
    """
    del signature
    from comlrl.core.rewards import call_reward_function

    return call_reward_function(
        reward_func,
        [list(c) for c in agent_completions],
        num_agents=num_agents,
        prompts=None if prompts is None else list(prompts),
        batch_items=None if batch_items is None else list(batch_items),
    )
