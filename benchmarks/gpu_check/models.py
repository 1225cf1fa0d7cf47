"""The check's two agents: Qwen2-architecture models with random weights, built in-process.

``0.5b`` is the published Qwen2.5-0.5B shape (24 layers, hidden 896, 14 query and 2 key/value
heads, a tied 151,936-row embedding: about 494M parameters) with a second agent of about a
quarter of its size, so the agents are heterogeneous. ``tiny`` is the same pair scaled down so
the whole check runs on a CPU in seconds. Nothing is downloaded: the tokenizer is the byte-level
BPE of :mod:`comlrl.core.testing`, widened to the model's vocabulary with filler tokens so that
every id a random model samples decodes to text.
"""

from __future__ import annotations

import json
import os

import torch

SIZES = ("0.5b", "tiny")

# Per size: (larger agent, smaller agent), the vocabulary rows shared by both.
SHAPES = {
    "0.5b": {
        "vocab_size": 151936,
        "agents": (
            dict(
                hidden_size=896,
                intermediate_size=4864,
                num_hidden_layers=24,
                num_attention_heads=14,
                num_key_value_heads=2,
            ),
            dict(
                hidden_size=512,
                intermediate_size=2048,
                num_hidden_layers=12,
                num_attention_heads=8,
                num_key_value_heads=2,
            ),
        ),
    },
    "tiny": {
        "vocab_size": 384,
        "agents": (
            dict(
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
            ),
            dict(
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=1,
                num_attention_heads=2,
                num_key_value_heads=1,
            ),
        ),
    },
}

DTYPES = ("bfloat16", "float16", "float32")


def check_size(size: str) -> None:
    """Reject an unknown size with the valid ones."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {list(SHAPES)}, got {size!r}.")


def check_dtype(dtype: str) -> None:
    """Reject an unknown dtype name with the valid ones."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {list(DTYPES)}, got {dtype!r}.")


def _filler(index: int) -> str:
    """A distinct lowercase word for filler token ``index`` (base 26)."""
    letters = ""
    while True:
        index, digit = divmod(index, 26)
        letters = chr(ord("a") + digit) + letters
        if index == 0:
            return letters


def widened_tokenizer(vocab_size: int):
    """The test tokenizer with filler tokens appended until it has ``vocab_size`` ids.

    The fillers have no merge rule, so prompts encode exactly as before; decoding a filler gives
    a space and a short word ("Ġ" is the byte-level space), so random samples read as text of
    varying length and every sampled id survives decoding.
    """
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from comlrl.core.testing import EOS_TOKEN, build_tokenizer

    base = build_tokenizer()
    data = json.loads(base.backend_tokenizer.to_str())
    vocab = data["model"]["vocab"]
    taken = set(vocab) | {t["content"] for t in data.get("added_tokens", [])}
    used = set(vocab.values()) | {t["id"] for t in data.get("added_tokens", [])}
    if vocab_size < len(used):
        raise ValueError(f"vocab_size must be at least {len(used)}, got {vocab_size}.")
    n = 0
    for token_id in range(vocab_size):
        if token_id in used:
            continue
        while "Ġq" + _filler(n) in taken:
            n += 1
        vocab["Ġq" + _filler(n)] = token_id
        n += 1
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(data)),
        eos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        padding_side="left",
    )
    if len(tok) != vocab_size:
        raise RuntimeError(f"widened tokenizer has {len(tok)} ids, expected {vocab_size}")
    return tok


def build_config(size: str, agent: int, tokenizer):
    """The Qwen2 config of one agent (0: the larger, 1: the smaller) of ``size``."""
    from transformers import Qwen2Config

    check_size(size)
    shape = SHAPES[size]
    return Qwen2Config(
        vocab_size=shape["vocab_size"],
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        use_sliding_window=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.eos_token_id,
        **shape["agents"][agent],
    )


def build_agent_dirs(root: str, size: str, dtype: str, device: str, seed: int = 0) -> dict:
    """Build both agents with random weights in ``dtype`` on ``device``, save each with the
    tokenizer under ``root/agent_{i}``, and describe them (directories, parameter counts)."""
    from transformers import AutoModelForCausalLM

    check_size(size)
    check_dtype(dtype)
    tok = widened_tokenizer(SHAPES[size]["vocab_size"])
    out = {"dirs": [], "parameters": [], "shapes": []}
    for agent in range(2):
        config = build_config(size, agent, tok)
        with torch.random.fork_rng(devices=[]), torch.device(device):
            torch.manual_seed(seed + agent)
            model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
        model.generation_config.pad_token_id = tok.pad_token_id
        model.generation_config.eos_token_id = tok.eos_token_id
        path = os.path.join(root, f"agent_{agent}")
        model.save_pretrained(path)
        tok.save_pretrained(path)
        out["dirs"].append(path)
        out["parameters"].append(sum(p.numel() for p in model.parameters()))
        out["shapes"].append(dict(SHAPES[size]["agents"][agent], vocab_size=config.vocab_size))
        del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out
