"""Real model shapes, built locally: random-init weights in a published architecture.

Nothing is downloaded. :func:`model_dir` saves a random-init model of a shape (and a tokenizer
whose vocabulary has the model's full size, so every sampled id decodes) once under the cache
root and returns the directory, which loads with ``from_pretrained`` like a hub checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

# Qwen2.5-0.5B's published shape (config.json of Qwen/Qwen2.5-0.5B).
QWEN25_05B = dict(
    vocab_size=151936,
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
# Qwen2.5-1.5B's published shape (config.json of Qwen/Qwen2.5-1.5B).
QWEN25_15B = dict(
    vocab_size=151936,
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
    num_key_value_heads=2,
    max_position_embeddings=131072,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
# The 0.5B's vocabulary on a two-layer body: the vocabulary's cost with little else.
TINY_BODY = dict(
    vocab_size=151936,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    tie_word_embeddings=True,
)
SHAPES = {"qwen05": QWEN25_05B, "qwen15": QWEN25_15B}

# The benchmark prompt's words, so prompts tokenize to real ids rather than <unk>.
_WORDS = "Write a story about cat sea robot garden winter lost key dragon the moon . ,".split()


def parameter_count(shape: dict) -> int:
    """Parameters of a Qwen2 model of ``shape`` (tied head), without building it."""
    h, inter, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    kv = h // shape["num_attention_heads"] * shape["num_key_value_heads"]
    attention = h * h + h + 2 * (h * kv + kv) + h * h  # q (bias), k and v (bias), o
    per_layer = attention + 3 * h * inter + 2 * h
    head = 0 if shape.get("tie_word_embeddings") else shape["vocab_size"] * h
    return shape["vocab_size"] * h + layers * per_layer + h + head


def _tokenizer(vocab_size: int):
    """A word-level tokenizer with exactly ``vocab_size`` ids (0 is EOS and padding)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    names = ["<|endoftext|>", "<unk>", *_WORDS]
    names += [f"t{i}" for i in range(len(names), vocab_size)]
    core = Tokenizer(models.WordLevel({n: i for i, n in enumerate(names)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
        unk_token="<unk>",
    )  # fmt: skip


def cache_root() -> Path:
    """Where the shapes are saved (``COMLRL_REALSIZE_CACHE``, else ``~/.cache/comlrl``)."""
    env = os.environ.get("COMLRL_REALSIZE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "comlrl" / "realsize"


def model_dir(name: str) -> str:
    """Build (once) and save the random-init model of shape ``name``; return its directory."""
    target = cache_root() / name
    shape = SHAPES[name]
    stamp = target / "shape.json"
    if stamp.exists() and json.loads(stamp.read_text()) == shape:
        return str(target)
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    staging = target.with_name(f".{name}-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    torch.manual_seed(0)
    config = Qwen2Config(**shape, eos_token_id=0, pad_token_id=0, bos_token_id=0)
    AutoModelForCausalLM.from_config(config).save_pretrained(staging)
    _tokenizer(shape["vocab_size"]).save_pretrained(staging)
    (staging / "shape.json").write_text(json.dumps(shape))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # only a finished directory ever carries the name
    return str(target)
