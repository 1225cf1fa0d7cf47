"""Small validators used by every config's ``__post_init__``.

Each raises ``ValueError`` whose message starts with the field name and says what is valid, so
that a user reading the error knows which knob to change and to what.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """Require an integer (not a bool) within ``[minimum, maximum]``."""
    if not _is_int(value):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}.")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value!r}.")
    return value


def check_optional_int(name: str, value: Any, minimum: int | None = None) -> int | None:
    """Like :func:`check_int` but ``None`` is allowed."""
    if value is None:
        return None
    return check_int(name, value, minimum)


def check_number(
    name: str,
    value: Any,
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    min_inclusive: bool = True,
    max_inclusive: bool = True,
    allow_none: bool = False,
) -> float | None:
    """Require a finite real number (not a bool) within the given bounds."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}.")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}.")
    if minimum is not None:
        bad = value < minimum if min_inclusive else value <= minimum
        if bad:
            op = ">=" if min_inclusive else ">"
            raise ValueError(f"{name} must be {op} {minimum}, got {value!r}.")
    if maximum is not None:
        bad = value > maximum if max_inclusive else value >= maximum
        if bad:
            op = "<=" if max_inclusive else "<"
            raise ValueError(f"{name} must be {op} {maximum}, got {value!r}.")
    return value


def normalize_choice(
    name: str, value: Any, choices: Iterable[str], aliases: dict[str, str] | None = None
) -> str:
    """Lower-case and strip a string option, map aliases, and require one of ``choices``."""
    allowed = list(choices)
    spellings = {a: t for a, t in (aliases or {}).items() if t in allowed}
    also = ", ".join(f"{a} = {t}" for a, t in spellings.items())
    wrong = f"{name} must be one of {allowed}{f' (also accepted: {also})' if also else ''}"
    if not isinstance(value, str):
        raise ValueError(f"{wrong}, got {value!r}.")
    key = value.strip().lower()
    key = spellings.get(key, key)
    if key not in allowed:
        raise ValueError(f"{wrong}, got {value!r}.")
    return key


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """Require ``value`` to be exactly one of ``choices``."""
    allowed = list(choices)
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}.")
    return value


def check_bool(name: str, value: Any) -> bool:
    """Require a real bool (YAML strings like "yes" are rejected with a hint)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}.")
    return value
