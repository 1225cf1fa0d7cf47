"""Tiny offline models for tests, benchmarks and the default demo.

Nothing here touches the network: a byte-level BPE tokenizer is trained on a small corpus
generated in-process, and a small causal LM (Qwen2, Llama or GPT-2 architecture) is built from a
config. Optionally the model is briefly pre-trained on the corpus, so it writes sentences that end
with EOS at varying lengths; that gives RL something to shape in a few seconds on a CPU.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

import torch

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"

_SUBJECTS = [
    "the cat",
    "a small dog",
    "the old sailor",
    "my neighbour",
    "a quiet robot",
    "the baker",
    "two children",
    "the fox",
    "a tired farmer",
    "the young queen",
    "an owl",
    "the painter",
]
_VERBS = [
    "walked",
    "sang",
    "found a key",
    "looked at the sea",
    "baked bread",
    "told a story",
    "climbed the hill",
    "waited",
    "laughed",
    "wrote a letter",
    "built a boat",
    "slept",
]
_TAILS = [
    "",
    "in the rain",
    "near the river",
    "before the sun came up",
    "with a red hat",
    "and then went home to rest by the warm fire",
    "because the night was long and cold",
    "while the bells of the little town rang again and again",
    "under the tall green trees",
    "and nobody knew why",
    "all day long",
    "for a friend who lived far away across the hills",
]
_TOPICS = [
    "a cat",
    "the sea",
    "a robot",
    "a garden",
    "winter",
    "a lost key",
    "a dragon",
    "the moon",
    "a bakery",
    "a long journey",
    "a river",
    "an old house",
]


def corpus(num_lines: int = 600, seed: int = 0) -> list[str]:
    """A deterministic corpus of short prompt-and-story lines of varying length."""
    rng = random.Random(seed)
    lines = []
    for _ in range(num_lines):
        topic = rng.choice(_TOPICS)
        n = rng.randint(1, 3)
        parts = [
            f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_TAILS)}".strip()
            for _ in range(n)
        ]
        story = ". ".join(p[0].upper() + p[1:] for p in parts) + "."
        lines.append(f"Write a story about {topic}. {story}")
    return lines


def prompts(num: int = 16, seed: int = 0) -> list[str]:
    """Prompts in the style of the tiny corpus, one per topic (cycled)."""
    rng = random.Random(seed)
    topics = list(_TOPICS)
    rng.shuffle(topics)
    return [f"Write a story about {topics[i % len(topics)]}." for i in range(num)]


def build_tokenizer(vocab_size: int = 320, separate_pad: bool = False):
    """Train a byte-level BPE tokenizer on :func:`corpus` and wrap it for transformers.

    By default pad and EOS are the same token (as in many chat models), which is the harder case
    for masking; ``separate_pad=True`` adds a distinct pad token.
    """
    from transformers import PreTrainedTokenizerFast

    specials = [EOS_TOKEN] + ([PAD_TOKEN] if separate_pad else [])
    return PreTrainedTokenizerFast(
        tokenizer_object=_byte_level_bpe(specials, vocab_size),
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN if separate_pad else EOS_TOKEN,
        padding_side="left",
    )


def _byte_level_bpe(specials: list[str], vocab_size: int):
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on :func:`corpus`, ``specials`` first."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


_SIZES = {
    # about 0.1M parameters with a 320-token vocabulary
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    ),
    # about 8M parameters
    "small": dict(
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=6,
        num_attention_heads=8,
        num_key_value_heads=4,
    ),
}


def build_config(
    arch: str = "qwen2",
    size: str = "tiny",
    vocab_size: int = 320,
    eos_token_id: int = 0,
    pad_token_id: int = 0,
    max_positions: int = 512,
):
    """A transformers config for a tiny model of the given architecture."""
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}.")
    # Keyword arguments of several config classes: typed loosely, as transformers reads them.
    dims: dict[str, Any] = dict(_SIZES[size])
    common: dict[str, Any] = dict(
        vocab_size=vocab_size,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=eos_token_id,
        tie_word_embeddings=True,
    )
    if arch == "qwen2":
        from transformers import Qwen2Config

        return Qwen2Config(max_position_embeddings=max_positions, **dims, **common)
    if arch == "llama":
        from transformers import LlamaConfig

        return LlamaConfig(max_position_embeddings=max_positions, **dims, **common)
    if arch == "gpt2":
        from transformers import GPT2Config

        return GPT2Config(
            n_embd=dims["hidden_size"],
            n_layer=dims["num_hidden_layers"],
            n_head=dims["num_attention_heads"],
            n_inner=dims["intermediate_size"],
            n_positions=max_positions,
            **common,
        )
    raise ValueError(f"arch must be one of 'qwen2', 'llama', 'gpt2', got {arch!r}.")


def build_model(
    tokenizer, arch: str = "qwen2", size: str = "tiny", seed: int = 0, pretrain_steps: int = 0
):
    """Build a randomly initialised causal LM for ``tokenizer``, optionally pre-trained briefly."""
    from transformers import AutoModelForCausalLM

    config = build_config(
        arch,
        size,
        vocab_size=len(tokenizer),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
        if pretrain_steps > 0:
            _pretrain(model, tokenizer, pretrain_steps, seed)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.eval()
    return model


def _pretrain(model, tokenizer, steps: int, seed: int, batch_size: int = 16) -> None:
    """Teach the model the corpus, each line ended by EOS, so samples stop at varied lengths."""
    rng = random.Random(seed)
    lines = corpus()
    eos = tokenizer.eos_token_id
    encoded = [tokenizer(line)["input_ids"] + [eos] for line in lines]
    optim = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        batch = rng.sample(encoded, batch_size)
        width = max(len(x) for x in batch)
        ids = torch.full((batch_size, width), eos, dtype=torch.long)
        labels = torch.full((batch_size, width), -100, dtype=torch.long)
        mask = torch.zeros((batch_size, width), dtype=torch.long)
        for i, x in enumerate(batch):
            ids[i, : len(x)] = torch.tensor(x)
            labels[i, : len(x)] = torch.tensor(x)
            mask[i, : len(x)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optim.zero_grad()
        loss.backward()
        optim.step()


def default_cache_root() -> Path:
    """Where :func:`tiny_model_dir` keeps built models (``COMLRL_CACHE`` overrides)."""
    root = os.environ.get("COMLRL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "comlrl"
    )
    return Path(root)


def tiny_model_dir(
    root: str | os.PathLike | None = None,
    arch: str = "qwen2",
    size: str = "tiny",
    seed: int = 0,
    pretrain_steps: int = 120,
    separate_pad: bool = False,
) -> str:
    """Build (once) and save a tiny model plus tokenizer; return the directory.

    The directory is keyed by every argument, so repeated calls reuse it. It loads with
    ``AutoModelForCausalLM.from_pretrained`` and ``AutoTokenizer.from_pretrained`` like a hub model.
    """
    spec = dict(
        arch=arch,
        size=size,
        seed=seed,
        pretrain_steps=pretrain_steps,
        separate_pad=separate_pad,
        v=1,
    )

    def build():
        tokenizer = build_tokenizer(separate_pad=separate_pad)
        model = build_model(
            tokenizer, arch=arch, size=size, seed=seed, pretrain_steps=pretrain_steps
        )
        return model, tokenizer

    return _cached_dir(root, f"{arch}-{size}", spec, build)


def _cached_dir(root, name: str, spec: dict, build, dtype=None) -> str:
    """The directory ``<root>/<name>-<hash of spec>``, written once (the model and tokenizer
    ``build()`` returns, the model cast to ``dtype`` when given, both by ``save_pretrained``)
    and published
    by an atomic rename, so concurrent builders never see half a directory."""
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    base = Path(root) if root is not None else default_cache_root() / "tiny-models"
    target = base / f"{name}-{key}"
    if (target / "config.json").exists():
        return str(target)
    model, tokenizer = build()
    if dtype is not None:
        model = model.to(dtype)
    base.mkdir(parents=True, exist_ok=True)
    staging = base / f".{target.name}-{os.getpid()}"
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    try:
        os.replace(staging, target)
    except OSError:
        # Another process published the same model first; theirs is identical.
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
    return str(target)


# Chat conventions of two hub families, for :func:`hub_tokenizer`: the special tokens (BOS
# only where the family adds one to every encoding) and a chat template written like theirs.
HUB_STYLES: dict[str, dict[str, Any]] = {
    "qwen2": dict(
        special=dict(eos_token="<|im_end|>", pad_token="<|endoftext|>"),
        extra=["<|im_start|>"],
        template=(
            "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
            "'<|im_end|>\\n' }}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
        ),
    ),
    "llama": dict(
        special=dict(
            bos_token="<|begin_of_text|>",
            eos_token="<|eot_id|>",
            pad_token="<|finetune_right_pad_id|>",
        ),
        extra=["<|start_header_id|>", "<|end_header_id|>"],
        template=(
            "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + "
            "'<|end_header_id|>\\n\\n' + m['content'] + '<|eot_id|>' }}{% endfor %}"
            "{% if add_generation_prompt %}"
            "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
        ),
    ),
}


def hub_tokenizer(arch: str = "qwen2", vocab_size: int = 320):
    """A byte-level BPE tokenizer trained on :func:`corpus` that carries ``arch``'s chat
    conventions (:data:`HUB_STYLES`): its special tokens (EOS distinct from pad; Llama's BOS
    added to every encoding) and a chat template."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    if arch not in HUB_STYLES:
        raise ValueError(f"arch must be one of {sorted(HUB_STYLES)}, got {arch!r}.")
    style = HUB_STYLES[arch]
    tok = _byte_level_bpe([*style["special"].values(), *style["extra"]], vocab_size)
    bos = style["special"].get("bos_token")
    if bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A",
            pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, tok.token_to_id(bos))],
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        padding_side="left",
        additional_special_tokens=list(style["extra"]),
        **style["special"],
    )
    fast.chat_template = style["template"]
    return fast


def hub_model_dir(
    root: str | os.PathLike | None = None,
    arch: str = "qwen2",
    seed: int = 0,
    pretrain_steps: int = 0,
) -> str:
    """A tiny checkpoint saved the way hub checkpoints are: a ``arch`` model (``"qwen2"`` or
    ``"llama"``) stored in bfloat16 safetensors by ``save_pretrained``, next to a
    :func:`hub_tokenizer` with its chat template and special tokens. Load it by the returned
    directory path, the code path a hub id takes once downloaded. Built once per argument set
    (like :func:`tiny_model_dir`)."""
    import torch

    spec = dict(hub=arch, seed=seed, pretrain_steps=pretrain_steps, v=1)

    def build():
        tokenizer = hub_tokenizer(arch)
        model = build_model(tokenizer, arch=arch, seed=seed, pretrain_steps=pretrain_steps)
        return model, tokenizer

    return _cached_dir(root, f"hub-{arch}", spec, build, dtype=torch.bfloat16)


def tiny_pair(
    arch: str = "qwen2",
    size: str = "tiny",
    seed: int = 0,
    pretrain_steps: int = 0,
    separate_pad: bool = False,
):
    """A ``(model, tokenizer)`` pair built in memory, for unit tests."""
    tokenizer = build_tokenizer(separate_pad=separate_pad)
    model = build_model(tokenizer, arch=arch, size=size, seed=seed, pretrain_steps=pretrain_steps)
    return model, tokenizer
