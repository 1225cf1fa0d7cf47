"""Taking a checkpoint directory for one run: an exclusive lock, and clearing what dead saves left.

The saving process of a run holds an advisory lock on the checkpoint directory while its
training session lives, so a second process cannot write into the same directory at the same
time. Holding the lock also proves that nobody else is writing there, so every leftover of an
earlier save (a staging dir killed before or after its owner file, a half-deleted old checkpoint,
a pointer's temporary file) belongs to a dead process and can be removed, whichever run wrote it.
The kernel drops the lock when its process dies, SIGKILL included.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import weakref
from typing import Any

from comlrl.core.checkpoint.errors import CheckpointError
from comlrl.core.checkpoint.layout import LATEST, STAGING_PREFIX, TRASH_PREFIX

try:
    import fcntl
except ImportError:  # not POSIX: no advisory locks
    fcntl = None  # type: ignore[assignment]

_log = logging.getLogger(__name__)


class _Lock:
    """One open descriptor holding a lock; closing twice is harmless."""

    def __init__(self, fd: int):
        self.fd: int | None = fd

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


# realpath -> lock. A process may take its own lock again, e.g. a retry after a failed train()
# whose traceback still keeps the old session alive.
_held: dict[str, _Lock] = {}


def lock_directory(directory: str, holder: Any) -> bool:
    """Lock ``directory`` for ``holder`` (released when ``holder`` is garbage collected).

    Returns False when the file system offers no locks; raises :class:`CheckpointError` when
    another process holds the directory.
    """
    if fcntl is None:
        return False
    key = os.path.realpath(directory)
    previous = _held.pop(key, None)
    if previous is not None:
        previous.close()
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise CheckpointError(
                f"checkpoint_dir {directory} is in use by another running process; wait for it "
                "to finish, or give this run another checkpoint directory."
            ) from None
        _log.warning("Cannot lock %s (%s); continuing without a lock.", directory, exc)
        return False
    lock = _held[key] = _Lock(fd)
    weakref.finalize(holder, lock.close)
    return True


def leftovers(directory: str) -> list[str]:
    """Staging dirs, half-deleted checkpoints and pointer temp files left in ``directory``."""
    if not os.path.isdir(directory):
        return []
    out = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.startswith((STAGING_PREFIX, TRASH_PREFIX)) and os.path.isdir(path):
            out.append(path)
        elif name.startswith(f".{LATEST}-") and os.path.isfile(path):
            out.append(path)
    return out


def clear_leftovers(directory: str) -> list[str]:
    """Remove every leftover of a dead save from ``directory``; returns what was removed.

    Only call this while holding the directory's lock (or where no lock is available)."""
    removed = []
    for path in leftovers(directory):
        _log.info("Removing %s, left by a save that did not finish.", path)
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        removed.append(path)
    return removed
