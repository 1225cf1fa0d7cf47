"""The audit-hook guard of the sandbox worker (stdlib only).

A Python-level convenience on top of the OS layers (the seccomp filter and Landlock are the
wall): it refuses sockets, process creation, signals, ``ctypes``, writes outside the work dir
and reads outside the allowed roots with a clear ``PermissionError``. Its state is bound into
the hook's default arguments when it is installed, never read from module globals, and the
hook refuses what would reach or rewrite it from inside (heap walks, trace functions, swapping
a function's code or the guard's defaults), so the generated code cannot easily switch it off.
"""

import os
import pathlib
import stat
import sys

_BLOCKED_EVENTS = frozenset(
    {
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "subprocess.Popen",
        "pty.spawn",
        "os.kill",
        "os.killpg",
        "os.startfile",
        "socket.__new__",
        "socket.connect",
        "socket.bind",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
        "resource.setrlimit",
        "resource.prlimit",
        "webbrowser.open",
        # What would find the hook or rewrite its state: heap walks, and trace functions
        # (through which a frame's locals can be written back).
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.settrace",
        "sys.setprofile",
    }
)
# Function attributes that, rewritten, would change what one of the guard's functions does.
# ``__code__`` is refused for every function (no library rewrites one); the defaults only for
# the guard's own (``namedtuple`` sets ``__defaults__`` on the functions it makes).
_FROZEN_ATTRIBUTES = frozenset({"__defaults__", "__kwdefaults__"})
_BLOCKED_IMPORTS = frozenset(
    {
        "ctypes",
        "_ctypes",
        "_posixsubprocess",
        "multiprocessing",
        "_multiprocessing",
    }
)
# Events that change the file system, and the positions of their path arguments.
_PATH_EVENTS = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.rename": (0, 1),
    "os.symlink": (1,),
    "os.link": (1,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (1,),
    "shutil.copymode": (1,),
    "shutil.copystat": (1,),
    "shutil.chown": (0,),
    "shutil.move": (1,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


_READ_EVENTS = {"os.listdir": 0, "os.scandir": 0}
_DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
# Path classes whose objects the hook converts itself (their class's own code, not the
# sample's); compared by identity, since hashing a class can run its metaclass's code.
_PATH_TYPES = (pathlib.PurePosixPath, pathlib.PosixPath)


def _realpath(
    path, lstat=os.lstat, readlink=os.readlink, getcwd=os.getcwd, islink=stat.S_ISLNK,
    reversed=reversed, oserror=OSError,
):  # fmt: skip
    """``path`` with every symlink resolved, using only C functions bound at import.

    ``os.path.realpath`` is Python code reading module globals the sample could replace.
    Returns "" (beneath no root) after 40 links, like the kernel's ELOOP.
    """
    if not path.startswith("/"):
        path = getcwd() + "/" + path
    pending, resolved, links = list(reversed(path.split("/"))), "", 0
    while pending:
        part = pending.pop()
        if part == "" or part == ".":
            continue
        if part == "..":
            resolved = resolved.rpartition("/")[0]
            continue
        candidate = resolved + "/" + part
        try:
            mode = lstat(candidate).st_mode
        except oserror:  # does not exist (yet): kept as written
            resolved = candidate
            continue
        if not islink(mode):
            resolved = candidate
            continue
        links += 1
        if links > 40:
            return ""
        target = readlink(candidate)
        if target.startswith("/"):
            resolved = ""
        pending.extend(reversed(target.split("/")))
    return resolved or "/"


def _resolve(
    path, realpath=_realpath, fspath=os.fspath, path_types=_PATH_TYPES, type=type, str=str,
    bytes=bytes, int=int,
):  # fmt: skip
    # Only exact str, bytes and int (a descriptor) are read as they are, and pathlib paths
    # through their own class: anything else could run the sample's code inside the hook.
    kind = type(path)
    if kind is int:
        return None
    if kind is not str and kind is not bytes:
        if kind is not path_types[0] and kind is not path_types[1]:
            return ""  # beneath no root: refused
        path = fspath(path)
    if type(path) is bytes:
        path = path.decode("utf-8", "surrogateescape")
    return realpath(path) if type(path) is str else ""


def _beneath(resolved, roots):
    for root in roots:
        if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
            return True
    return False


def _inside(path, root, resolve=_resolve, beneath=_beneath):
    resolved = resolve(path)
    return resolved is None or resolved == "/dev/null" or beneath(resolved, (root,))


def _may_read(path, roots, devices=_DEVICES, resolve=_resolve, beneath=_beneath):
    resolved = resolve(path)
    if resolved is None or resolved in devices:
        return True
    return beneath(resolved, roots)


def _text(value, type=type, str=str, issubclass=issubclass):
    """An exact str for a str (a subclass's methods are the sample's code), else None."""
    kind = type(value)
    return value if kind is str else (str.__str__(value) if issubclass(kind, str) else None)


def _hook(
    event, args, root, readable, ours, blocked=_BLOCKED_EVENTS, imports=_BLOCKED_IMPORTS,
    frozen=_FROZEN_ATTRIBUTES, path_events=tuple(_PATH_EVENTS.items()),
    read_events=tuple(_READ_EVENTS.items()), write_flags=_WRITE_FLAGS, inside=_inside,
    may_read=_may_read, text=_text, function=type(_text), type=type, int=int, len=len,
    denied=PermissionError,
):  # fmt: skip
    if event in blocked or event.startswith("ctypes."):
        raise denied(f"sandbox: {event} is not allowed")
    if event == "import" and args and text(args[0]) in imports:
        raise denied(f"sandbox: importing {text(args[0])} is not allowed")
    if event in ("object.__setattr__", "object.__delattr__") and len(args) >= 2:
        name = text(args[1])
        if type(args[0]) is function and name == "__code__":
            raise denied("sandbox: changing a function's __code__ is not allowed")
        if name in frozen:
            for own in ours:
                if args[0] is own:
                    raise denied(f"sandbox: changing the guard's {name} is not allowed")
    if event == "open" and len(args) >= 3:
        path, mode, flags = args[0], args[1], args[2]
        mode = text(mode) if mode is not None else ""
        # An unreadable mode counts as writing.
        writing = mode is None or "w" in mode or "a" in mode or "x" in mode or "+" in mode
        writing = writing or (type(flags) is int and flags & write_flags)
        if writing and not inside(path, root):
            raise denied("sandbox: writing there is not allowed")
        if not writing and path is not None and not may_read(path, (root, *readable)):
            raise denied("sandbox: reading there is not allowed")
    for name, index in read_events:
        if event == name and args and args[index] is not None:
            if not may_read(args[index], (root, *readable)):
                raise denied(f"sandbox: {event} there is not allowed")
    for name, positions in path_events:
        if event == name:
            for index in positions:
                if index < len(args) and not inside(args[index], root):
                    raise denied(f"sandbox: {event} there is not allowed")


# The guard's functions, whose defaults hold its state.
_OURS = (_realpath, _resolve, _beneath, _inside, _may_read, _text, _hook)


def install(workdir, read_roots):
    """Refuse network, process creation, writes outside ``workdir`` and reads outside it and
    ``read_roots`` (the interpreter's own files), at the Python level."""
    root = _realpath(os.path.abspath(workdir))
    readable = tuple(_realpath(os.path.abspath(p)) for p in read_roots)

    def hook(event, args, root=root, readable=readable, check=_hook, ours=_OURS):
        check(event, args, root, readable, ours)

    sys.addaudithook(hook)
