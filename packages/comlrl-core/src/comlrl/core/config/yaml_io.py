"""Run files: YAML in the task-repo schema, plus ``--set a.b=value`` overrides."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import yaml


def load_yaml(path: str) -> dict[str, Any]:
    """Read a YAML run file; the top level must be a mapping."""
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the top level of a run file must be a mapping.")
    return data


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``override`` merged in (mappings merge, other values replace)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"magrpo.num_turns=2"`` → ``(["magrpo", "num_turns"], 2)``; values are YAML."""
    if "=" not in text:
        raise ValueError(f"--set expects key=value (e.g. magrpo.num_turns=2), got {text!r}.")
    key, raw = text.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise ValueError(f"--set has an empty key in {text!r}.")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ValueError(f"--set {key}: cannot parse value {raw!r}: {exc}") from exc
    return path, value


def apply_overrides(config: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply every ``key=value`` override to a copy of ``config``."""
    out = copy.deepcopy(config)
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for part in path[:-1]:
            if node.get(part) is None:
                node[part] = {}
            if not isinstance(node[part], dict):
                raise ValueError(f"--set {'.'.join(path)}: {part!r} is not a section.")
            node = node[part]
        node[path[-1]] = value
    return out
