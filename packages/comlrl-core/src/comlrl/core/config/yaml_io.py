"""Run files: YAML in the task-repo schema, plus ``--set a.b=value`` overrides."""

from __future__ import annotations

import copy
import re
from collections.abc import Hashable, Iterable
from typing import Any

import yaml

from comlrl.core.errors import UserError


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key repeated in one mapping (YAML keeps the last one
    silently, so a second ``magrpo:`` section would replace the first)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            # Merge keys (<<: *base) may legitimately be overridden by explicit keys.
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"found the key {key!r} twice (first at line {seen[key].line + 1})",
                    key_node.start_mark,
                )
            if isinstance(key, Hashable):
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


# PyYAML follows YAML 1.1, whose floats need a dot: "1e-5" and "3e-3" would load as strings, the
# way learning rates are most often written. YAML 1.2's float syntax reads them as numbers.
_FLOAT_1_2 = re.compile(
    r"""^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)(?:[eE][-+]?[0-9]+)?$
    |^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$""",
    re.X,
)
_StrictLoader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:float"]
    for key, resolvers in _StrictLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_1_2, list("-+0123456789."))
# Integers keep YAML 1.1's resolver, which is consulted first for digit-only text.
for _first in "-+0123456789":
    _StrictLoader.yaml_implicit_resolvers[_first].sort(
        key=lambda pair: pair[0] != "tag:yaml.org,2002:int"
    )


def load_yaml(path: str) -> dict[str, Any]:
    """Read a YAML run file; the top level must be a mapping.

    A missing file, malformed YAML or a repeated key is a ValueError naming the file (and the
    line and column, for YAML errors).
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such run file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the run file ({exc}).") from exc
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise ValueError(f"{where}: malformed YAML: {problem}.") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: malformed YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(
            f"{path}: the top level of a run file must be a mapping of sections (e.g. "
            f"'algorithm: magrpo'), got {type(data).__name__}."
        )
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


def parse_override(text: str, flag: str = "--set") -> tuple[list[str], Any]:
    """``"magrpo.num_turns=2"`` → ``(["magrpo", "num_turns"], 2)``; values are YAML. ``flag``
    is the command-line flag that gave ``text`` (``--set`` or ``--override``), named in errors."""
    if "=" not in text:
        raise UserError(f"{flag} expects key=value (e.g. magrpo.num_turns=2), got {text!r}.")
    key, raw = text.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise UserError(f"{flag} has an empty key in {text!r}.")
    try:
        value = yaml.load(raw, Loader=_StrictLoader) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise UserError(f"{flag} {key}: cannot parse value {raw!r}: {exc}") from exc
    return path, value


def apply_overrides(
    config: dict[str, Any], overrides: Iterable[str | tuple[str, str]]
) -> dict[str, Any]:
    """Apply every ``key=value`` override to a copy of ``config``. An override is the text, or
    a ``(flag, text)`` pair naming the flag that gave it (errors name that flag)."""
    out = copy.deepcopy(config)
    for item in overrides:
        flag, text = item if isinstance(item, tuple) else ("--set", item)
        path, value = parse_override(text, flag)
        node = out
        for part in path[:-1]:
            if node.get(part) is None:
                node[part] = {}
            if not isinstance(node[part], dict):
                raise UserError(f"{flag} {'.'.join(path)}: {part!r} is not a section.")
            node = node[part]
        node[path[-1]] = value
    return out
