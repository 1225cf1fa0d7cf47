"""The untrusted stage of a sandboxed run: it executes the generated code (stdlib only).

Started fresh (``python -I -S -B _worker.py``) by the judge, so its memory holds neither the
tests nor any channel to the trainer. It reads the job head from fd 0, runs the agents' code,
then answers the judge's requests (call this, read that attribute) on fd 3 with plain data or
handles. Whatever the code does to this process, it can only change the values it answers with.
"""

import builtins
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _guard  # noqa: E402
import _wire  # noqa: E402

sys.path.pop(0)
REQUESTS, REPLIES = 0, int(sys.argv[1])
MESSAGE_LIMIT = 400


def _message(exc):
    try:
        text = str(exc)
    except BaseException:  # the generated exception's __str__ may itself fail
        text = ""
    if type(text) is not str:
        text = ""
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def _error(exc):
    names = [cls.__name__ for cls in type(exc).__mro__]
    detail = _message(exc)
    if isinstance(exc, SyntaxError):
        detail = f"line {exc.lineno}, column {exc.offset}: {exc.msg}"
    return {"raise": [n for n in names if type(n) is str], "message": detail}


class _Objects:
    """Objects the judge holds handles to; kept alive so their numbers stay valid."""

    def __init__(self):
        self.by_number, self.numbers = [], {}

    def handle(self, obj):
        number = self.numbers.get(id(obj))
        if number is None:
            number = len(self.by_number)
            self.by_number.append(obj)
            self.numbers[id(obj)] = number
        return number

    def resolve(self, number):
        if not 0 <= number < len(self.by_number):
            raise _wire.WireError(f"unknown handle {number}")
        return self.by_number[number]


def _perform(request, objects):
    op = request.get("op")
    target = objects.resolve(int(request["n"]))
    value = _wire.decode(request.get("value"), objects.resolve)
    if op == "call":
        args = _wire.decode(request.get("args", []), objects.resolve)
        kwargs = _wire.decode(request.get("kwargs", {"d": []}), objects.resolve)
        return target(*args, **kwargs)
    if op == "getattr":
        return getattr(target, str(value))
    if op == "setattr":
        name, item = value
        setattr(target, str(name), item)
        return None
    if op == "iter":
        return list(target)
    if op == "len":
        return len(target)
    if op == "getitem":
        return target[value]
    if op == "contains":
        return value in target
    if op == "str":
        return str(target)
    raise _wire.WireError(f"unknown request {op!r}")


def _exports(namespace, objects):
    stdlib = getattr(sys, "stdlib_module_names", frozenset())
    names = {}
    for name, value in list(namespace.items()):
        if name.startswith("__"):
            continue
        if type(value) is type(sys) and value.__name__ in stdlib:
            names[name] = {"m": value.__name__}
            continue
        try:
            names[name] = _wire.encode(value, objects.handle)
        except (TypeError, ValueError, RecursionError):
            names[name] = {"h": objects.handle(value)}
    return names


def main():
    head = _wire.receive(REQUESTS)
    if head.get("python_guard"):
        _guard.install(head["workdir"], head["read_roots"])
    objects = _Objects()
    namespace = {"__name__": "__sandbox__", "__builtins__": builtins}
    try:
        exec(compile(head["setup"], "<agents>", "exec"), namespace)
    except BaseException as exc:  # the generated code may raise anything, SystemExit included
        _wire.send(REPLIES, {"setup_error": _error(exc)})
        os._exit(0)
    names = _exports(namespace, objects)
    _wire.send(REPLIES, {"ready": names, "handles": len(objects.by_number)})
    while True:
        request = _wire.receive(REQUESTS)
        try:
            reply = {"ok": _wire.encode(_perform(request, objects), objects.handle)}
        except BaseException as exc:  # whatever the code raised goes back to the judge's test
            reply = _error(exc)
        _wire.send(REPLIES, reply)


if __name__ == "__main__":
    try:
        main()
    finally:
        # Skips atexit handlers and finalizers the generated code may have registered.
        os._exit(0)
