"""The agents' tokenizers: one per agent (given, shared or loaded from the agents' names), a pad
token for each, the configured special tokens, and the check that every tokenizer fits its
model's embedding table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from comlrl.core.models.sources import is_model_name, unresolved_model


def ensure_pad_token(tokenizer) -> None:
    """Use EOS as the pad token when the tokenizer has none; fail if neither exists."""
    if getattr(tokenizer, "pad_token_id", None) is None:
        if getattr(tokenizer, "eos_token", None) is not None:
            tokenizer.pad_token = tokenizer.eos_token
    if getattr(tokenizer, "pad_token_id", None) is None:
        raise ValueError("Tokenizer must expose pad_token_id (or an eos_token to pad with).")


def resolve_tokenizers(tokenizer: Any, sources: Sequence[Any], model_config: dict | None = None):
    """One tokenizer per agent: a given list, one shared tokenizer, or loaded from names."""
    count = len(sources)
    if tokenizer is None:
        if not all(is_model_name(s) for s in sources):
            raise ValueError("Tokenizer(s) must be provided when agents are model objects.")
        from transformers import AutoTokenizer

        trust = bool((model_config or {}).get("trust_remote_code", False))
        cache: dict[str, Any] = {}
        toks = []
        for s in sources:
            key = str(s)
            if key not in cache:
                with unresolved_model(key, "agent_model"):
                    cache[key] = AutoTokenizer.from_pretrained(key, trust_remote_code=trust)
            toks.append(cache[key])
    elif isinstance(tokenizer, (list, tuple)):
        if len(tokenizer) != count:
            raise ValueError(
                f"tokenizers length ({len(tokenizer)}) must match agents ({count}); pass one "
                "tokenizer to share, or one per agent."
            )
        toks = list(tokenizer)
    else:
        toks = [tokenizer] * count
    for tok in toks:
        ensure_pad_token(tok)
    return toks


def add_special_tokens(tokenizers: Sequence[Any], models: Sequence[Any], special_tokens: dict):
    """Add special tokens to each tokenizer and grow the matching embeddings to fit."""
    for tok in {id(t): t for t in tokenizers}.values():
        tok.add_special_tokens(dict(special_tokens))
    seen = set()
    for tok, model in zip(tokenizers, models):
        if id(model) in seen:
            continue
        seen.add(id(model))
        if len(tok) > model.get_input_embeddings().weight.shape[0]:
            model.resize_token_embeddings(len(tok))


def check_vocab_fits(tokenizers: Sequence[Any], models: Sequence[Any]) -> None:
    """Every agent's tokenizer must fit its model's input embedding: larger token ids would
    index past the table (a CUDA assert or an IndexError deep inside the forward pass)."""
    for i, (tok, model) in enumerate(zip(tokenizers, models)):
        embed = getattr(model, "get_input_embeddings", None)
        table = embed() if callable(embed) else None
        weight = getattr(table, "weight", None)
        if weight is None or not hasattr(tok, "__len__"):
            continue
        rows = int(weight.shape[0])
        if len(tok) > rows:
            raise ValueError(
                f"agent {i}: the tokenizer has {len(tok)} tokens but the model's input embedding "
                f"has {rows} rows. Use the tokenizer saved with this model, or add the extra "
                "tokens through model_config['special_tokens'] (which resizes the embedding)."
            )
