"""The audit-hook guard of the sandbox worker (stdlib only).

A Python-level layer under the OS ones: it refuses sockets, process creation, signals, frame
and heap introspection, writes outside the work dir and reads outside the allowed roots.
"""

import os
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
    }
)
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


def install(workdir, read_roots):
    """Refuse network, process creation, writes outside ``workdir`` and reads outside it and
    ``read_roots`` (the interpreter's own files), at the Python level."""
    root = os.path.realpath(workdir)
    readable = tuple(os.path.realpath(p) for p in read_roots)
    realpath, fspath, sep = os.path.realpath, os.fspath, os.sep

    def resolve(path):
        if isinstance(path, int):
            return None
        try:
            text = fspath(path)
        except TypeError:
            return ""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        return realpath(text)

    def beneath(resolved, roots):
        return any(resolved == r or resolved.startswith(r.rstrip(sep) + sep) for r in roots)

    def inside(path):
        resolved = resolve(path)
        return resolved is None or resolved == "/dev/null" or beneath(resolved, (root,))

    def may_read(path):
        resolved = resolve(path)
        if resolved is None or resolved in _DEVICES:
            return True
        return beneath(resolved, (root, *readable))

    def hook(event, args):
        if event in _BLOCKED_EVENTS or event.startswith("ctypes."):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and args and args[0] in _BLOCKED_IMPORTS:
            raise PermissionError(f"sandbox: importing {args[0]} is not allowed")
        if event == "open" and len(args) >= 3:
            path, mode, flags = args[0], args[1], args[2]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and not inside(path):
                raise PermissionError(f"sandbox: writing {path!r} is not allowed")
            if not writing and path is not None and not may_read(path):
                raise PermissionError(f"sandbox: reading {path!r} is not allowed")
        if event in _READ_EVENTS and args and args[0] is not None and not may_read(args[0]):
            raise PermissionError(f"sandbox: listing {args[0]!r} is not allowed")
        positions = _PATH_EVENTS.get(event)
        if positions:
            for index in positions:
                if index < len(args) and not inside(args[index]):
                    raise PermissionError(f"sandbox: {event} on {args[index]!r} is not allowed")

    sys.addaudithook(hook)
