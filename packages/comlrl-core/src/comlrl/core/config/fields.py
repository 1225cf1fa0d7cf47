"""Config fields that carry their own help text and check.

``knob(default, help=..., check=...)`` makes a dataclass field whose metadata holds a help text
(read by the docs generator, :mod:`comlrl.core.config.reference`) and a check (run by
:class:`~comlrl.core.config.base.CommonConfig`'s ``__post_init__``). A check is called as
``check(name, value, config)`` and returns the value to store (normalized, or filled in), or
raises ``ValueError`` naming the field. ``describe(cls)`` says in a few words what is valid.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from comlrl.core.config.validation import (
    check_bool,
    check_int,
    check_number,
    check_optional_int,
    normalize_choice,
)
from comlrl.core.placement.devices import validate_device_spec

HELP = "help"
CHECK = "check"


def knob(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    check: Check | None = None,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field with a help text and an optional check in its metadata."""
    if not help or not help.strip():
        raise TypeError("knob() needs a non-empty help text.")
    return dataclasses.field(
        default=default, default_factory=default_factory, metadata={HELP: help, CHECK: check}
    )


def retune(default: Any, *, check: Check | None = None) -> Any:
    """A subclass's new default (and, if given, check) for an inherited knob; the field keeps
    the inherited help text (see ``CommonConfig.__init_subclass__``)."""
    return dataclasses.field(default=default, metadata={CHECK: check} if check else {})


@dataclasses.dataclass(frozen=True)
class Knob:
    """A knob that several, but not all, config families declare: the help text and the usual
    check are written once; each family calls it with its own default (and check, if it must
    differ)."""

    help: str
    check: Check | None = None

    def __call__(self, default: Any, *, check: Check | None = None) -> Any:
        """A field for one config class."""
        return knob(default, help=self.help, check=check if check is not None else self.check)


def help_of(field: dataclasses.Field) -> str | None:
    """The field's help text, or None."""
    return field.metadata.get(HELP)


def check_of(field: dataclasses.Field) -> Check | None:
    """The field's check, or None."""
    return field.metadata.get(CHECK)


class Check:
    """Base of every field check. ``reads_config`` checks look at other fields too, so they run
    after every check that reads only its own value."""

    reads_config = False

    def __call__(self, name: str, value: Any, config: Any) -> Any:
        raise NotImplementedError

    def describe(self, cls: type) -> str:
        """What is valid, in words, for the docs."""
        raise NotImplementedError


def _bounds(low: Any, high: Any, low_op: str, high_op: str, kind: str) -> str:
    low, high = (f"{v:g}" if isinstance(v, float) else v for v in (low, high))
    if low is not None and high is not None:
        return f"{low} {low_op} {kind} {high_op} {high}"
    if low is not None:
        return f"{kind} {'≥' if low_op == '≤' else '>'} {low}"
    if high is not None:
        return f"{kind} {high_op} {high}"
    return kind


class Integer(Check):
    """An int (not a bool) within ``[minimum, maximum]``; ``optional`` also allows None."""

    def __init__(self, minimum: int | None = None, maximum: int | None = None, *, optional=False):
        self.minimum, self.maximum, self.optional = minimum, maximum, optional

    def __call__(self, name, value, config):
        if self.optional:
            if self.maximum is None:
                return check_optional_int(name, value, self.minimum)
            if value is None:
                return None
        return check_int(name, value, self.minimum, self.maximum)

    def describe(self, cls):
        text = _bounds(self.minimum, self.maximum, "≤", "≤", "int")
        return f"None or {text}" if self.optional else text


class Number(Check):
    """A finite real number (not a bool) within the bounds; ``optional`` also allows None."""

    def __init__(
        self,
        minimum: float | None = None,
        maximum: float | None = None,
        *,
        min_inclusive: bool = True,
        max_inclusive: bool = True,
        optional: bool = False,
    ):
        self.minimum, self.maximum = minimum, maximum
        self.min_inclusive, self.max_inclusive = min_inclusive, max_inclusive
        self.optional = optional

    def __call__(self, name, value, config):
        return check_number(
            name,
            value,
            self.minimum,
            self.maximum,
            min_inclusive=self.min_inclusive,
            max_inclusive=self.max_inclusive,
            allow_none=self.optional,
        )

    def describe(self, cls):
        low_op = "≤" if self.min_inclusive else "<"
        high_op = "≤" if self.max_inclusive else "<"
        text = _bounds(self.minimum, self.maximum, low_op, high_op, "float")
        return f"None or {text}" if self.optional else text


class Boolean(Check):
    """A real bool: YAML strings such as "yes" are refused."""

    def __call__(self, name, value, config):
        return check_bool(name, value)

    def describe(self, cls):
        return "bool"


class Choice(Check):
    """One of ``choices`` after lower-casing, stripping and mapping ``aliases``.

    ``choices`` is a sequence, or a callable taking the config class and returning one: the
    place for per-class choices (a ClassVar) and for choices read from a registry.
    """

    def __init__(
        self,
        choices: Sequence[str] | Callable[[Any], Sequence[str]],
        aliases: dict[str, str] | None = None,
        *,
        optional: bool = False,
    ):
        self.choices, self.aliases, self.optional = choices, aliases or {}, optional

    def allowed(self, cls: type) -> tuple[str, ...]:
        """The valid values for config class ``cls``."""
        return tuple(self.choices(cls) if callable(self.choices) else self.choices)

    def __call__(self, name, value, config):
        if value is None and self.optional:
            return None
        return normalize_choice(name, value, self.allowed(type(config)), self.aliases)

    def describe(self, cls):
        allowed = self.allowed(cls)
        parts = []
        for choice in allowed:
            alts = sorted(a for a, target in self.aliases.items() if target == choice)
            parts.append(f"{choice} ({', '.join(alts)})" if alts else choice)
        text = ", ".join(parts)
        return f"None, {text}" if self.optional else text


class Registered(Choice):
    """One of the functions registered in :mod:`comlrl.core.algos` under ``kind``; the docs
    list the built-in ones (a process may register more)."""

    def __init__(self, kind: str, *, optional: bool = False):
        from comlrl.core import algos

        super().__init__(lambda cls: algos.available(kind), optional=optional)
        self.kind = kind

    def describe(self, cls):
        from comlrl.core import algos

        text = ", ".join(algos.available(self.kind, builtin=True)) + ", or a registered name"
        return f"None, {text}" if self.optional else text


class Text(Check):
    """A string (``nonempty``: not empty) or, with ``optional``, None."""

    def __init__(self, what: str = "a string", *, optional: bool = True, nonempty: bool = False):
        self.what, self.optional, self.nonempty = what, optional, nonempty

    def __call__(self, name, value, config):
        if value is None and self.optional:
            return None
        if not isinstance(value, str) or (self.nonempty and not value):
            tail = " or None" if self.optional else ""
            raise ValueError(f"{name} must be {self.what}{tail}, got {value!r}.")
        return value

    def describe(self, cls):
        return f"None or {self.what}" if self.optional else self.what


class Mapping(Check):
    """A dict or None."""

    def __call__(self, name, value, config):
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"{name} must be a mapping or None, got {type(value).__name__}.")
        return value

    def describe(self, cls):
        return "None or a mapping"


class Custom(Check):
    """A plain ``func(name, value) -> value`` with a fixed description."""

    def __init__(self, func: Callable[[str, Any], Any], valid: str):
        self.func, self.valid = func, valid

    def __call__(self, name, value, config):
        return self.func(name, value)

    def describe(self, cls):
        return self.valid


class Noted(Check):
    """``check``, with a rule that another part of the config enforces added to its description.

    ``note`` is a text, or a callable taking the config class and returning one (or None).
    """

    def __init__(self, check: Check, note: str | Callable[[type], str | None]):
        self.check, self.note = check, note
        self.reads_config = check.reads_config

    def __call__(self, name, value, config):
        return self.check(name, value, config)

    def describe(self, cls):
        note = self.note(cls) if callable(self.note) else self.note
        text = self.check.describe(cls)
        return f"{text}; {note}" if note else text


class FallsBackTo(Check):
    """None takes the value of field ``source``; the result must pass ``check``."""

    reads_config = True

    def __init__(self, source: str, check: Check):
        self.source, self.check = source, check

    def __call__(self, name, value, config):
        if value is None:
            value = getattr(config, self.source)
        return self.check(name, value, config)

    def describe(self, cls):
        return f"None (→ `{self.source}`) or {self.check.describe(cls)}"


class Devices(Check):
    """A device spec: None, "auto", one device or a list (1 entry, or ``count(config)``).

    ``when(config)`` false skips the check (the devices are not used); ``mp_requires``: the spec
    must be given under ``parallel_training='mp'``.
    """

    reads_config = True

    def __init__(
        self,
        count: Callable[[Any], int | None] | None = None,
        *,
        when: Callable[[Any], bool] | None = None,
        mp_requires: bool = False,
    ):
        self.count, self.when, self.mp_requires = count, when, mp_requires

    def __call__(self, name, value, config):
        if self.mp_requires and value is None and config.parallel_training == "mp":
            raise ValueError(f"parallel_training='mp' requires explicit {name}.")
        if self.when is None or self.when(config):
            count = self.count(config) if self.count is not None else None
            validate_device_spec(value, name, count)
        return value

    def describe(self, cls):
        return 'None, "auto", a device, or a list of them'
