"""Messages between the sandbox judge and its worker: framed JSON of plain data (stdlib only).

Only values of exact builtin types cross (``type(v) is int``, not a subclass), so nothing the
generated code defines, an ``__eq__`` or ``__bool__`` of its own included, ever reaches the
judge. Anything else is sent as a numbered handle to an object that stays in the worker.
"""

import json
import os
import select
import struct

MAX_MESSAGE = 16 * 1024 * 1024
MAX_DEPTH = 64
# Containers and items one message may hold: bytes alone do not bound the decoded size (16 MB
# of nested empty lists would need several GB), and the judge must not run out of memory on it.
MAX_NODES = 2_000_000
_HEADER = struct.Struct(">I")


class WireError(Exception):
    """The other side sent something malformed, too large, or went away."""


def send(fd, message):
    """Write one framed message to ``fd``."""
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_MESSAGE:
        raise WireError(f"message of {len(data)} bytes is over the {MAX_MESSAGE} byte limit")
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd, size):
    chunks, left = [], size
    while left:
        select.select([fd], [], [])  # interruptible by the judge's alarm
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise WireError("the worker went away")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(fd):
    """Read one framed message from ``fd``; malformed input raises :class:`WireError`."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    if size > MAX_MESSAGE:
        raise WireError(f"message of {size} bytes is over the {MAX_MESSAGE} byte limit")
    data = _read_exact(fd, size)
    # An upper bound on the parsed nodes (brackets and commas inside strings count too), taken
    # before parsing so an oversized structure is never built.
    nodes = data.count(b"[") + data.count(b"{") + data.count(b",")
    if nodes > MAX_NODES:
        raise WireError(f"message of over {MAX_NODES} values")
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError, MemoryError) as exc:
        raise WireError(f"unreadable message: {type(exc).__name__} {exc}") from None


def encode(value, handle=None, depth=0):
    """Plain data as JSON-ready tagged values; other objects become handles via ``handle(obj)``.

    Without ``handle`` (the judge's side) a non-plain value raises ``TypeError``.
    """
    if depth > MAX_DEPTH:
        raise TypeError(f"value nested deeper than {MAX_DEPTH} levels")
    kind, deeper = type(value), depth + 1
    if value is None or kind is bool or kind is str or kind is float:
        return value
    if kind is int:
        return {"i": str(value)}  # JSON numbers would lose the int/float distinction for big ints
    if kind is list:
        return [encode(v, handle, deeper) for v in value]
    if kind is tuple:
        return {"t": [encode(v, handle, deeper) for v in value]}
    if kind is dict:
        return {
            "d": [[encode(k, handle, deeper), encode(v, handle, deeper)] for k, v in value.items()]
        }
    if kind is set or kind is frozenset:
        return {"s" if kind is set else "f": [encode(v, handle, deeper) for v in value]}
    if kind is bytes or kind is bytearray:
        return {"b" if kind is bytes else "y": value.hex()}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    if isinstance(value, Handle):
        return {"h": value.number}
    if handle is None:
        raise TypeError(f"a {kind.__name__} cannot be sent to the sandboxed code")
    return {"h": handle(value)}


class Handle:
    """Base of the judge's stand-ins for objects that live in the worker."""

    number = -1


def decode(data, resolve, depth=0):
    """Rebuild a value from :func:`encode`'s output; ``resolve(number)`` maps handles.

    Too deep, malformed or (``MemoryError``) too large data raises :class:`WireError`.
    """
    try:
        return _decode(data, resolve, depth)
    except MemoryError:
        raise WireError("value too large to decode") from None


def _decode(data, resolve, depth):
    if depth > MAX_DEPTH:
        raise WireError(f"value nested deeper than {MAX_DEPTH} levels")
    if data is None or type(data) in (bool, str, float):
        return data
    deeper = depth + 1
    if type(data) is list:
        return [_decode(v, resolve, deeper) for v in data]
    if type(data) is not dict or len(data) != 1:
        raise WireError(f"unexpected value {type(data).__name__}")
    ((tag, body),) = data.items()
    try:
        if tag == "i":
            return int(body)
        if tag == "t":
            return tuple(_decode(v, resolve, deeper) for v in body)
        if tag == "d":
            return {_decode(k, resolve, deeper): _decode(v, resolve, deeper) for k, v in body}
        if tag in ("s", "f"):
            items = (_decode(v, resolve, deeper) for v in body)
            return set(items) if tag == "s" else frozenset(items)
        if tag in ("b", "y"):
            raw = bytes.fromhex(body)
            return raw if tag == "b" else bytearray(raw)
        if tag == "c":
            return complex(float(body[0]), float(body[1]))
        if tag == "h":
            return resolve(int(body))
    except (TypeError, ValueError) as exc:
        raise WireError(f"malformed {tag!r} value: {exc}") from None
    raise WireError(f"unknown value tag {tag!r}")
