"""Exact JSON for the non-tensor part of a checkpoint.

Plain JSON loses tuples (they come back as lists) and silently turns int dict keys into
strings. Both would make a restored state differ from the saved one, so tuples are tagged and
non-string keys are refused. Floats round-trip exactly (``json`` writes their shortest repr), and
NaN/inf are kept.
"""

from __future__ import annotations

import json
import os
from typing import Any

from comlrl.core.checkpoint.errors import CorruptCheckpointError

_TUPLE = "__tuple__"


def encode(value: Any, where: str = "state") -> Any:
    """``value`` as JSON-ready data; raises TypeError naming the path of anything unsupported."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {_TUPLE: [encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"{where}: dict keys must be strings to be checkpointed, got {key!r} "
                    f"({type(key).__name__})."
                )
            if key == _TUPLE:
                raise TypeError(f"{where}: the key {_TUPLE!r} is reserved by the checkpoint codec.")
            out[key] = encode(item, f"{where}.{key}")
        return out
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        # NumPy scalars (np.float64, np.int64, ...) read back as the Python number they hold
        return encode(value.item(), where)
    raise TypeError(
        f"{where}: cannot checkpoint a {type(value).__name__}; resumable state must be plain "
        "data (None, bool, int, float, str, list, tuple, dict with str keys)."
    )


def decode(value: Any) -> Any:
    """Inverse of :func:`encode`."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {_TUPLE}:
            return tuple(decode(v) for v in value[_TUPLE])
        return {k: decode(v) for k, v in value.items()}
    return value


def dumps(value: Any, where: str = "state") -> str:
    """Encode and serialise ``value``."""
    return json.dumps(encode(value, where), sort_keys=True, separators=(",", ":"))


def read_json(path: str | os.PathLike, *, tagged: bool = True) -> Any:
    """Parse a JSON file of a checkpoint; a damaged file raises :class:`CorruptCheckpointError`."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError as exc:
        raise CorruptCheckpointError(f"{path}: file is missing.") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptCheckpointError(f"{path}: not valid JSON ({exc}).") from exc
    return decode(data) if tagged else data
