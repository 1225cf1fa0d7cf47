"""Load task rows from the hub, from local JSON/JSONL/Parquet files, or from a shipped sample."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

_SPLIT_RE = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(?:\[\s*(-?\d*)\s*:\s*(-?\d*)\s*\])?\s*$")
_LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")


def parse_split(split: str) -> tuple[str, slice | None]:
    """Split ``"train[16:]"`` into ``("train", slice(16, None))``; a bare name has no slice."""
    if not isinstance(split, str):
        raise ValueError(
            f"dataset split must be a string such as 'train' or 'test[:16]', got {split!r}."
        )
    match = _SPLIT_RE.match(split)
    if match is None:
        raise ValueError(
            f"dataset split {split!r} is not valid; use a name with an optional "
            "[start:stop] slice, e.g. 'train' or 'test[66:82]'."
        )
    name, start, stop = match.groups()
    if start is None and stop is None:
        return name, None
    return name, slice(int(start) if start else None, int(stop) if stop else None)


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSON-lines file; blank lines are skipped."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number} is not valid JSON: {exc.msg}.") from exc
    return rows


def _read_file(path: Path, split: str) -> list[dict]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return read_jsonl(path)
    if suffix == ".parquet":
        import pyarrow.parquet as pq  # pyarrow arrives with datasets; imported only when used

        return pq.read_table(path).to_pylist()
    if suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, list):
            return data
        if isinstance(data, dict) and isinstance(data.get(split), list):
            return data[split]
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            return data["data"]
        raise ValueError(
            f"{path} must hold a list of rows, or a mapping from split names "
            f"(such as {split!r}) to lists of rows."
        )
    raise ValueError(f"dataset file {path} must end in one of {list(_LOCAL_SUFFIXES)}.")


def _read_dir(path: Path, split: str) -> list[dict]:
    candidates = [path / f"{split}{suffix}" for suffix in _LOCAL_SUFFIXES]
    candidates += sorted(path.glob(f"{split}-*.parquet"))
    found = [c for c in candidates if c.is_file()]
    if not found:
        raise ValueError(
            f"dataset directory {path} has no file for split {split!r}; expected "
            f"{split}.jsonl, {split}.json or {split}.parquet."
        )
    if found[0].suffix == ".parquet" and found[0].name != f"{split}.parquet":
        return [
            row for part in found if part.suffix == ".parquet" for row in _read_file(part, split)
        ]
    return _read_file(found[0], split)


def _read_hub(hub_id: str, split: str, config: str | None) -> list[dict]:
    try:
        import datasets  # heavy and network-bound, so loaded only for hub ids
    except ImportError as exc:
        raise ValueError(
            f"dataset {hub_id!r} looks like a hub id, but the 'datasets' package is "
            "not installed; install it or point dataset.name at a local file."
        ) from exc
    try:
        loaded = datasets.load_dataset(hub_id, config, split=split)
    except Exception as exc:  # the hub client raises many unrelated types; keep the cause
        raise ValueError(
            f"could not load dataset {hub_id!r} (split {split!r}) from the hub: {exc}. "
            "Offline, use a local JSON/JSONL/Parquet file or leave dataset.name "
            "empty for the built-in sample."
        ) from exc
    return [dict(row) for row in loaded]


def builtin_rows(package: str, filename: str, split: str) -> list[dict]:
    """Rows of a shipped sample whose ``split`` field equals ``split``."""
    text = resources.files(package).joinpath("data", filename).read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    available = sorted({row.get("split", "train") for row in rows})
    picked = [row for row in rows if row.get("split", "train") == split]
    if not picked:
        raise ValueError(f"the built-in sample has no split {split!r}; available: {available}.")
    return picked


def load_rows(
    source: str | None,
    split: str,
    *,
    builtin: Callable[[str], list[dict]],
    hub_config: str | None = None,
    aliases: dict[str, Callable[[str], list[dict]]] | None = None,
) -> list[dict]:
    """Load the rows of ``split`` (with an optional ``[a:b]`` slice) from ``source``.

    ``source`` None means the task's built-in sample. A name in ``aliases`` uses that offline
    loader. An existing path is read as a local file or a directory of per-split files.
    Anything else is treated as a hub id and loaded with ``datasets`` (which the hub applies
    the slice to itself).
    """
    name, window = parse_split(split)
    if source is None:
        rows = builtin(name)
    elif aliases and source.strip().lower() in aliases:
        rows = aliases[source.strip().lower()](name)
    else:
        path = Path(source).expanduser()
        if path.is_file():
            rows = _read_file(path, name)
        elif path.is_dir():
            rows = _read_dir(path, name)
        elif path.suffix.lower() in _LOCAL_SUFFIXES or source.startswith((".", "/", "~")):
            raise ValueError(f"dataset file {source!r} does not exist.")
        else:
            return _read_hub(source, split, hub_config)
    return list(rows[window]) if window is not None else list(rows)


def limit_rows(rows: list[dict], limit: int | None, field: str) -> list[dict]:
    """The first ``limit`` rows (all when None); a limit below 1 is an error."""
    if limit is None:
        return rows
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"{field} must be a positive integer or null, got {limit!r}.")
    return rows[:limit]


def require_fields(row: dict[str, Any], fields: tuple[str, ...], task: str) -> None:
    """Raise a ValueError naming the first field of ``fields`` missing from ``row``."""
    if not isinstance(row, dict):
        raise ValueError(f"{task} dataset rows must be mappings, got {type(row).__name__}.")
    for key in fields:
        if key not in row or row[key] is None:
            raise ValueError(
                f"{task} dataset row is missing the field {key!r}; "
                f"rows need {list(fields)}, got keys {sorted(row)}."
            )
