"""Model sources: what an agent (or critic, reward or reference model) is given as, a hub id,
a local directory or a built model object, and the checks a named source gets before anything
loads (a mistyped path, a directory without weights, a truncated weight file), with the error
that names the argument and the fix."""

from __future__ import annotations

import contextlib
import json
import os
import re
import zipfile
from collections.abc import Sequence
from typing import Any

from comlrl.core.errors import UserError

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
