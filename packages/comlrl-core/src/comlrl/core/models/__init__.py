"""Loading training targets: agents (and later critics, reward and reference models).

A source is a hub id, a local directory, or an already built model object. One object passed
for several agents is parameter sharing: the agents share weights and gradients while each keeps
its own optimizer.

The subpackage's modules: :mod:`.setup` (what the config does to loaded agents: LoRA, gradient
checkpointing, the ``device_map`` check), :mod:`.adapters` (several agents as PEFT adapters on
one shared base), :mod:`.backbone` (the transformer body and its hidden width, for critics and
reward models), :mod:`.reference` (frozen reference models and the KL estimators to them) and
:mod:`.forward_api` (which arguments a model class's ``forward`` takes).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import zipfile
from collections.abc import Sequence
from typing import Any

import torch

from comlrl.core.errors import UserError
from comlrl.core.models.setup import check_device_map

# Floating dtypes a model can be loaded in (with "auto": the checkpoint's own dtype; without
# any, float32).
DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64", "float", "half", "double")
# "name" or "org/name": anything else that does not exist on disk is a mistyped path.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def is_model_name(value: Any) -> bool:
    return isinstance(value, (str, bytes)) or hasattr(value, "__fspath__")


def resolve_model_sources(agent_model: Any, agents: Any, num_agents: int | None) -> list[Any]:
    """Return one source per agent from the homogeneous/heterogeneous arguments.

    ``agent_model`` is a name loaded once per agent; ``agents`` is a list of names and/or model
    objects. Both may be given only when ``agents`` repeats ``agent_model``.
    """
    if agent_model is None and agents is None:
        raise ValueError("Either agent_model or agents must be provided.")
    if agents is not None:
        if is_model_name(agents) or not isinstance(agents, Sequence) or len(agents) == 0:
            raise ValueError(
                "agents must be a non-empty list of model names, directories or model objects."
            )
        if any(a is None for a in agents):
            raise ValueError("agents entries must be non-null.")
        if num_agents is not None and agent_model is not None and len(agents) != num_agents:
            raise ValueError(f"agents length ({len(agents)}) must match num_agents ({num_agents}).")
        if agent_model is not None:
            if not all(is_model_name(a) and str(a) == str(agent_model) for a in agents):
                raise ValueError(
                    "agent_model and agents conflict: pass agent_model for identical agents, "
                    "or agents for a heterogeneous list, not both."
                )
        return list(agents)
    if not is_model_name(agent_model):
        if num_agents not in (None, 1):
            raise ValueError(
                "agent_model should be a string to create homogeneous agents; to share one model "
                "object across agents pass agents=[model] * num_agents."
            )
        return [agent_model]
    count = 2 if num_agents is None else num_agents
    if count < 1:
        raise ValueError(f"num_agents must be >= 1, got {count}.")
    return [agent_model] * count


def resolve_agents(inputs: Any, args: Any) -> tuple[list, str]:
    """The agents' model sources (one per agent) and the run's model name, after checking the
    agent and tokenizer counts against ``inputs.num_agents`` and ``args.num_agents``."""
    num_agents, agents, tokenizer = inputs.num_agents, inputs.agents, inputs.tokenizer
    sources = resolve_model_sources(inputs.agent_model, agents, num_agents)
    count = len(sources)
    if agents is not None and inputs.agent_model is None and num_agents not in (None, count):
        raise ValueError(f"num_agents ({num_agents}) does not match len(agents) ({count}).")
    if args.num_agents is not None and args.num_agents != count:
        raise ValueError(
            f"args.num_agents ({args.num_agents}) does not match the number of agents "
            f"({count}); set the config's num_agents to {count}."
        )
    if tokenizer is None and not all(isinstance(s, (str, os.PathLike)) for s in sources):
        raise ValueError("Tokenizer(s) must be provided when agents are model objects.")
    if isinstance(tokenizer, (list, tuple)) and len(tokenizer) != count:
        raise ValueError(f"tokenizers length ({len(tokenizer)}) must match agents ({count}).")
    return sources, infer_model_name(sources[0])


def infer_model_name(source: Any) -> str:
    """A readable name for a source: the string itself or the model's ``_name_or_path``."""
    if is_model_name(source):
        return str(source)
    base = getattr(source, "base_model", None)
    for obj in (base, source):
        config = getattr(obj, "config", None) if obj is not None else None
        if config is not None:
            name = getattr(config, "_name_or_path", "") or getattr(config, "model_type", "")
            if name:
                return str(name)
    return type(source).__name__


def resolve_dtype(value: Any, field: str = "model_config.dtype") -> torch.dtype | str | None:
    """``None``, ``"auto"``, a torch floating dtype, or its name (``"bfloat16"``,
    ``"torch.float16"``) → the dtype to load with; anything else is a ValueError naming ``field``."""
    if value is None or (isinstance(value, torch.dtype) and value.is_floating_point):
        return value
    if isinstance(value, str):
        name = value.strip().lower().removeprefix("torch.")
        if name == "auto":
            return "auto"
        if name in DTYPE_NAMES:
            return getattr(torch, name)
    raise ValueError(
        f"{field}: unknown dtype {value!r}; use one of {['auto', *DTYPE_NAMES]} or a torch "
        "floating dtype."
    )


def check_model_config(model_config: dict | None) -> None:
    """Cheap checks of ``model_config`` before anything loads: its dtype names, and no
    ``device_map`` (see :func:`comlrl.core.models.setup.check_device_map`)."""
    cfg = model_config or {}
    for key in ("dtype", "torch_dtype"):
        resolve_dtype(cfg.get(key), f"model_config.{key}")
    check_device_map(cfg)


def shares_parameters(model_config: dict | None) -> bool:
    """``model_config["share_parameters"]``: whether agents of one model name are one model
    object (parameter sharing, as ``agents=[model, model]`` gives in Python); False when unset."""
    value = (model_config or {}).get("share_parameters", False)
    if not isinstance(value, bool):
        raise UserError(
            f"model_config.share_parameters must be true or false, got {value!r}: true makes "
            "agents of one model name share one model object (one set of weights)."
        )
    return value


def model_load_kwargs(model_config: dict | None) -> dict:
    """``from_pretrained`` keyword arguments from a ``model_config`` dict.

    Without a dtype in ``model_config`` (or its ``model_kwargs``) the model loads in float32,
    whatever dtype the checkpoint is stored in: transformers would otherwise load a bf16 hub
    checkpoint in bf16, and training bf16 weights (and AdamW state) rounds small updates away.
    An explicit dtype (``"bfloat16"``, ``"auto"`` for the checkpoint's own) is honoured."""
    cfg = dict(model_config or {})
    check_device_map(cfg)
    kwargs: dict[str, Any] = dict(cfg.get("model_kwargs") or {})
    field = "model_config.dtype" if cfg.get("dtype") is not None else "model_config.torch_dtype"
    dtype = resolve_dtype(cfg.get("dtype", cfg.get("torch_dtype")), field)
    if dtype is not None:
        kwargs["dtype"] = dtype
    elif "dtype" not in kwargs and "torch_dtype" not in kwargs:
        kwargs["dtype"] = torch.float32
    if "attn_implementation" in cfg:
        kwargs["attn_implementation"] = cfg["attn_implementation"]
    # Remote code runs arbitrary Python from the hub: only when the user says so.
    kwargs["trust_remote_code"] = bool(cfg.get("trust_remote_code", False))
    return kwargs


def _looks_like_path(text: str) -> bool:
    return (
        os.path.isabs(text)
        or text.startswith((".", "~"))
        or "\\" in text
        or not _HUB_ID.fullmatch(text)
    )


def check_model_source(source: Any, field: str = "agent_model") -> None:
    """Fail early, naming ``field`` and the file, when a model name cannot load.

    Model objects and hub ids pass (the hub is asked only when loading). A local path must be
    a directory with a readable ``config.json`` and complete weight files; a name that looks
    like a path but does not exist is an error rather than a hub lookup.
    """
    if not is_model_name(source):
        return
    text = os.fsdecode(source) if isinstance(source, bytes) else os.fspath(source)
    path = os.path.expanduser(text)
    if not os.path.exists(path):
        if _looks_like_path(text):
            raise ValueError(
                f"{field}: model path {text!r} does not exist; give a directory holding "
                "config.json and the weights, or a hub id such as 'Qwen/Qwen2.5-0.5B'."
            )
        return
    if not os.path.isdir(path):
        raise ValueError(
            f"{field}: {text!r} is a file; a model is a directory holding config.json and the "
            "weights (as save_pretrained writes it), or a hub id."
        )
    _check_model_dir(path, field)


def check_model_sources(sources: Sequence[Any], field: str = "agent_model") -> None:
    """:func:`check_model_source` for each distinct name in ``sources``."""
    for src in {str(s): s for s in sources if is_model_name(s)}.values():
        check_model_source(src, field)


def _check_model_dir(path: str, field: str) -> None:
    names = sorted(os.listdir(path))
    if "adapter_config.json" in names and "config.json" not in names:
        return  # a PEFT adapter: its base model is named inside and checked by peft
    if not names:
        raise ValueError(
            f"{field}: model directory {path!r} is empty; it needs config.json and the weights "
            "(e.g. model.safetensors), as save_pretrained writes them."
        )
    config = os.path.join(path, "config.json")
    if "config.json" not in names:
        raise ValueError(
            f"{field}: model directory {path!r} has no config.json (it holds {names[:8]}); "
            "point at the directory save_pretrained wrote."
        )
    try:
        with open(config, encoding="utf-8") as fh:
            parsed = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise ValueError(f"{field}: {config} is not valid JSON{where}: {exc}.") from exc
    if not isinstance(parsed, dict):
        raise ValueError(f"{field}: {config} must hold a JSON object, got {type(parsed).__name__}.")
    for weights in _weight_files(path, names, field):
        _check_weight_file(weights, field)


def _weight_files(path: str, names: list[str], field: str) -> list[str]:
    for base in _WEIGHT_FILES:
        index = os.path.join(path, base + ".index.json")
        if os.path.isfile(index):
            try:
                with open(index, encoding="utf-8") as fh:
                    shards = sorted(set(json.load(fh)["weight_map"].values()))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
                raise ValueError(
                    f"{field}: {index} is not a valid shard index (a JSON object with "
                    f"'weight_map'): {exc!r}."
                ) from exc
            files = [os.path.join(path, s) for s in shards]
            missing = [f for f in files if not os.path.isfile(f)]
            if missing:
                raise ValueError(
                    f"{field}: {index} lists weight files that are missing: {missing}."
                )
            return files
    files = [os.path.join(path, n) for n in names if n.endswith((".safetensors", ".bin"))]
    if not files:
        raise ValueError(
            f"{field}: model directory {path!r} has config.json but no weights "
            f"({' or '.join(_WEIGHT_FILES)}); it holds {names[:8]}."
        )
    return files


def _check_weight_file(path: str, field: str) -> None:
    size = os.path.getsize(path)
    truncated = f"{field}: weight file {path} is truncated or damaged ({size} bytes)"
    if path.endswith(".safetensors"):
        # Layout: 8-byte little-endian header length, a JSON header giving each tensor's byte
        # range, then the data; a file shorter than the last range is cut off.
        with open(path, "rb") as fh:
            head = fh.read(8)
            length = int.from_bytes(head, "little") if len(head) == 8 else -1
            if length < 0 or 8 + length > size:
                raise ValueError(f"{truncated}: its header is incomplete; re-download or re-save.")
            try:
                header = json.loads(fh.read(length))
                end = max(
                    (int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"),
                    default=0,
                )
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ValueError(f"{truncated}: its header is unreadable ({exc!r}).") from exc
        if 8 + length + end > size:
            raise ValueError(
                f"{truncated}: its header describes {8 + length + end} bytes; re-download or "
                "re-save it."
            )
    elif size == 0 or (_zip_signature(path) and not zipfile.is_zipfile(path)):
        raise ValueError(f"{truncated}; re-download or re-save it.")


def _zip_signature(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == b"PK\x03\x04"


def load_causal_lm(source: str, model_config: dict | None = None, field: str = "model"):
    """Load a causal LM from a hub id or local directory (checked first, see
    :func:`check_model_source`; ``field`` names the argument in its errors)."""
    from transformers import AutoModelForCausalLM

    from comlrl.core.quiet import quiet_hub_progress

    check_model_source(source, field)
    with quiet_hub_progress(), unresolved_model(source, field):
        return AutoModelForCausalLM.from_pretrained(str(source), **model_load_kwargs(model_config))


@contextlib.contextmanager
def unresolved_model(source: Any, field: str):
    """Turn the ``OSError`` transformers raises for a name it cannot resolve (a mistyped hub
    id, a private repository without a token, no network) into a :class:`UserError` that names
    ``field`` and the fix."""
    try:
        yield
    except OSError as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(
            f"{field}: cannot load {str(source)!r} ({reason}); check the spelling of the hub id "
            "(e.g. 'Qwen/Qwen2.5-0.5B'), log in with `huggingface-cli login` for a private "
            "one, or give a local directory that save_pretrained wrote."
        ) from exc


def load_agents(
    sources: Sequence[Any], model_config: dict | None = None, share_named: bool = False
) -> list:
    """Materialise every source. Repeated names load once and are deep-copied (no shared
    weights); a repeated object stays shared (parameter sharing). Every named source is
    checked before the first one loads. With ``share_named`` a repeated name stays one object
    (agents of one base that get one adapter each on it)."""
    check_model_sources(sources)
    loaded: dict[str, Any] = {}
    models = []
    for src in sources:
        if is_model_name(src):
            key = str(src)
            if key in loaded:
                models.append(loaded[key] if share_named else copy.deepcopy(loaded[key]))
            else:
                loaded[key] = load_causal_lm(key, model_config)
                models.append(loaded[key])
        else:
            models.append(src)
    return models


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


def freeze_model(model):
    """Put ``model`` in eval mode with gradients off (reference and frozen models)."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def unique_models(models: Sequence[Any]) -> list:
    """The distinct model objects, in first-seen order (shared agents count once)."""
    return list({id(m): m for m in models}.values())


def build_agents(
    sources: Sequence[Any],
    tokenizer: Any,
    model_config: dict,
    devices: Sequence[Any],
    share_named: bool = False,
) -> tuple[list, list]:
    """The agents as a trainer uses them: every agent and its tokenizer loaded, the configured
    special tokens added and each agent moved to its device (as :mod:`comlrl.core.placement`
    planned); returns (agents, tokenizers). The agents' ``config`` and ``generation_config``
    stay as the user gave them: generation passes the tokenizer's pad and EOS ids explicitly.
    ``share_named`` (a ``peft_config`` run on one device) keeps agents of one named base one
    object, which :func:`~comlrl.core.models.setup.prepare_agents` gives one adapter per
    agent."""
    share_named = share_named and len({str(d) for d in devices}) == 1
    agents = load_agents(sources, model_config, share_named)
    tokenizers = resolve_tokenizers(tokenizer, sources, model_config)
    if model_config.get("special_tokens"):
        add_special_tokens(tokenizers, agents, model_config["special_tokens"])
    check_vocab_fits(tokenizers, agents)
    for model, dev in zip(agents, devices):
        model.to(dev)
    return agents, tokenizers
