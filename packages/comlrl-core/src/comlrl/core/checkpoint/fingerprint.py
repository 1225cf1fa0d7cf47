"""What a checkpoint must agree with before a trainer may resume from it.

A fingerprint is plain data describing the run: trainer class, config (minus the fields that may
change between sessions), each model's class, tensor names/shapes/dtypes and config, each
tokenizer, the optimizers, the training data, the stateful callbacks, and the frozen reference
models, which are recorded by source and a digest of their weights, never copied. The reward
function is not compared: its qualified name depends on how a script was started.
:func:`differences` compares two fingerprints and lists every mismatch in words.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import TYPE_CHECKING, Any

import torch

from comlrl.core.checkpoint.modules import alias_map, describe
from comlrl.core.config.redact import redact

# Config fields that may differ on resume: more epochs, other devices, other logging/eval
# cadence and memory knobs. Fields ending in _device/_devices are portable too.
PORTABLE_FIELDS = frozenset(
    {
        "num_train_epochs",
        "num_iterations",
        "num_online_iterations",
        "parallel_training",
        "distributed_mode",
        "logging_steps",
        "steps_unit",
        "eval_steps",
        "save_steps",
        "logging_interval",
        "output_dir",
        "verbose",
        "eval_interval",
        "eval_num_samples",
        "eval_batch_size",
        "eval_greedy",
        "eval_at_end",
        "report_to",
        "generation_batch_size",
        "logprob_max_tokens",
        "dpo_backward",
        "monitors",  # thresholds watch the run; they do not change what it trains
    }
)

if TYPE_CHECKING:
    from comlrl.core.trainer import TrainerBase

# Keys of a transformers config that say where or how it was saved, not what the model is.
_VOLATILE_CONFIG_KEYS = frozenset(
    {"transformers_version", "name_or_path", "dtype", "torch_dtype", "architectures"}
)

_DATASET_SAMPLE = 1000


def is_portable(name: str, extra: frozenset[str] = frozenset()) -> bool:
    """Whether a config field may change between the saving and the resuming session."""
    return (
        name in PORTABLE_FIELDS
        or name in extra
        or name.startswith("_")
        or name.endswith("_device")
        or name.endswith("_devices")
    )


def _plain(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists; odd objects their repr)."""
    return json.loads(json.dumps(value, sort_keys=True, default=repr))


def config_fingerprint(args: Any, extra_portable: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The config's non-portable fields as plain data, secrets redacted."""
    if dataclasses.is_dataclass(args):
        values = {f.name: getattr(args, f.name) for f in dataclasses.fields(args)}
    else:
        values = dict(vars(args)) if args is not None else {}
    # Secrets never reach a manifest; both sides of a resume compare the same redacted form.
    return {
        k: _plain(redact(v, k))
        for k, v in sorted(values.items())
        if not is_portable(k, extra_portable)
    }


def model_config_dict(model: Any) -> dict[str, Any] | None:
    """A model's transformers config without save-location keys, or None for plain modules."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        return None
    raw = config.to_dict()
    return {
        k: _plain(v)
        for k, v in sorted(raw.items())
        if not k.startswith("_") and k not in _VOLATILE_CONFIG_KEYS
    }


def model_fingerprint(model: Any) -> dict[str, Any]:
    """Class, tensors, tied entries, trainable set and config of one model."""
    out = describe(model)
    out["config"] = model_config_dict(model)
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tokenizer_fingerprint(tokenizer: Any) -> dict[str, Any] | None:
    """What decides how text becomes ids: vocabulary, special tokens, padding, chat template."""
    if tokenizer is None:
        return None
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    template = getattr(tokenizer, "chat_template", None)
    return {
        "class": type(tokenizer).__name__,
        "size": len(tokenizer) if hasattr(tokenizer, "__len__") else None,
        "vocab_sha256": _sha(json.dumps(sorted(vocab.items()))),
        "special_tokens": _plain(getattr(tokenizer, "special_tokens_map", {})),
        "padding_side": getattr(tokenizer, "padding_side", None),
        "truncation_side": getattr(tokenizer, "truncation_side", None),
        "chat_template_sha256": _sha(str(template)) if template is not None else None,
    }


def dataset_fingerprint(dataset: Any) -> dict[str, Any] | None:
    """Class, length and a content digest (a Hugging Face dataset's own fingerprint, else a
    hash of the first items)."""
    if dataset is None:
        return None
    length = len(dataset) if hasattr(dataset, "__len__") else None
    digest = getattr(dataset, "_fingerprint", None)
    if digest is None and length is not None:
        h = hashlib.sha256()
        for i in range(min(length, _DATASET_SAMPLE)):
            h.update(
                json.dumps(
                    dataset[i], sort_keys=True, default=lambda o: type(o).__qualname__
                ).encode()
            )
        digest = h.hexdigest()
    return {"class": type(dataset).__name__, "length": length, "digest": digest}


def weights_digest(model: Any) -> str:
    """SHA-256 over a model's tensor names, dtypes, shapes and bytes."""
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        t = tensor.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def reference_fingerprint(trainer: TrainerBase) -> list[dict[str, Any]]:
    """Source and weight digest of every frozen reference model slot."""
    refs = list(getattr(trainer, "reference_models", None) or [])
    sources = list(getattr(trainer, "sources", []))
    digests: dict[int, str] = {}
    out = []
    for i, ref in enumerate(refs):
        if id(ref) not in digests:
            digests[id(ref)] = weights_digest(ref)
        src = sources[i] if i < len(sources) else None
        label = str(src) if isinstance(src, str) else f"copy of agent {i} (in memory)"
        out.append({"source": label, "sha256": digests[id(ref)]})
    return out


def _world_size(trainer: TrainerBase) -> int:
    """How many data-parallel processes train together (each holds 1/n of a global batch)."""
    dist = getattr(trainer, "dist", None)
    return int(getattr(dist, "world_size", 1))


def trainer_fingerprint(trainer: TrainerBase) -> dict[str, Any]:
    """The whole fingerprint of a trainer, as plain data."""
    models = trainer.trainable_models()
    aliases = alias_map(models)
    tokenizers = trainer.checkpoint_tokenizers()
    extra = frozenset(getattr(trainer, "checkpoint_portable_fields", ()))
    return _plain(
        {
            "trainer": f"{type(trainer).__module__}.{type(trainer).__qualname__}",
            "num_agents": getattr(trainer, "num_agents", None),
            "world_size": _world_size(trainer),
            "config": config_fingerprint(getattr(trainer, "args", None), extra),
            "models": {
                name: ({"same_as": aliases[name]} if aliases[name] else model_fingerprint(m))
                for name, m in models.items()
            },
            "tokenizers": {n: tokenizer_fingerprint(t) for n, t in tokenizers.items()},
            "optimizers": [
                {
                    "class": f"{type(o).__module__}.{type(o).__qualname__}",
                    "group_sizes": [len(g["params"]) for g in o.param_groups],
                }
                for o in trainer.optimizers_list()
            ],
            "references": reference_fingerprint(trainer),
            "train_dataset": dataset_fingerprint(getattr(trainer, "train_dataset", None)),
            "callbacks": sorted(trainer.checkpointing.callbacks(trainer)),
        }
    )


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def differences(saved: Any, current: Any, path: str = "") -> list[str]:
    """Every place where two fingerprints differ, as ``"path: saved vs current"`` lines."""
    where = path or "fingerprint"
    if isinstance(saved, dict) and isinstance(current, dict):
        out = []
        for key in sorted(set(saved) | set(current), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in current:
                out.append(f"{sub}: in the checkpoint ({_short(saved[key])}), not now")
            elif key not in saved:
                out.append(f"{sub}: not in the checkpoint, now {_short(current[key])}")
            else:
                out.extend(differences(saved[key], current[key], sub))
        return out
    if isinstance(saved, (list, tuple)) and isinstance(current, (list, tuple)):
        saved, current = list(saved), list(current)
    if saved != current:
        return [f"{where}: {_short(saved)} vs {_short(current)}"]
    return []
