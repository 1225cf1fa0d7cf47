"""Crash-safe file system steps: stage, fsync, rename, then point ``latest`` at the result.

A reader never sees a half-written checkpoint: files are written into a hidden staging
directory, flushed to disk, and the directory is renamed into place in one step. The
``latest`` pointer is replaced (also atomically) only after that rename, so it always names a
complete checkpoint. Deletion renames first, so a half-deleted checkpoint never looks like one.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time

from comlrl.core.checkpoint.layout import LATEST, STAGING_PREFIX, TRASH_PREFIX, checkpoint_name

# Test hook, read only here: "SECONDS" or "SECONDS@SEQ" makes the writer sleep in the middle of
# every checkpoint whose sequence is >= SEQ (default 1), after it wrote a PAUSED marker into the
# staging directory. Tests use it to kill a process while a checkpoint is half written.
TEST_DELAY_ENV = "COMLRL_TEST_CHECKPOINT_DELAY"
# Test hook, read only here: "STAGE:N" SIGKILLs this process the N-th time (counted from 1,
# within this process) a save reaches STAGE, one of KILL_STAGES. The crash tests use it to kill
# a run at exact points of a checkpoint write; a real run never sets it.
TEST_KILL_ENV = "COMLRL_TEST_CHECKPOINT_KILL"
KILL_STAGES = ("staging", "owner", "weights", "manifest", "published", "latest", "rotating")
_stage_counts: dict[str, int] = {}


def fsync_path(path: str) -> None:
    """Flush a file or directory to disk."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) if os.path.isdir(path) else os.O_RDONLY
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: str) -> None:
    """Flush every file and directory below ``root`` (deepest first), then ``root``."""
    for dirpath, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            fsync_path(os.path.join(dirpath, name))
        fsync_path(dirpath)


def make_staging(directory: str, sequence: int) -> str:
    """A fresh hidden directory next to the final checkpoint location."""
    os.makedirs(directory, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{checkpoint_name(sequence)}-", dir=directory)


def publish(staging: str, target: str) -> None:
    """Flush ``staging`` and rename it to ``target`` (which must not exist)."""
    fsync_tree(staging)
    if os.path.lexists(target):
        raise FileExistsError(f"Refusing to overwrite the existing checkpoint {target}.")
    os.rename(staging, target)
    fsync_path(os.path.dirname(target) or ".")


def publish_replacing(staging: str, target: str) -> None:
    """Flush ``staging`` and rename it to ``target``, swapping out what ``target`` held (an
    earlier checkpoint, or an empty directory): the old one is renamed aside first and deleted
    only once the new one is in place, and put back if the rename fails."""
    fsync_tree(staging)
    if not os.path.lexists(target):
        publish(staging, target)
        return
    parent, name = os.path.split(target)
    trash = tempfile.mkdtemp(prefix=f"{TRASH_PREFIX}{name.lstrip('.')}-", dir=parent or ".")
    old = os.path.join(trash, name)
    os.rename(target, old)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(old, target)
        raise
    fsync_path(parent or ".")
    shutil.rmtree(trash)


def write_latest(directory: str, name: str) -> None:
    """Atomically point ``<directory>/latest`` at the checkpoint ``name``."""
    final = os.path.join(directory, LATEST)
    fd, tmp = tempfile.mkstemp(prefix=f".{LATEST}-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(name + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_path(directory)


def remove_tree(path: str) -> None:
    """Delete a checkpoint (or staging) directory: rename it out of the way, then remove it."""
    parent, name = os.path.split(path)
    trash = tempfile.mkdtemp(prefix=f"{TRASH_PREFIX}{name.lstrip('.')}-", dir=parent or ".")
    moved = os.path.join(trash, name)
    os.rename(path, moved)
    fsync_path(parent or ".")
    kill_point("rotating")
    shutil.rmtree(trash)


def pause_for_tests(staging: str, sequence: int) -> None:
    """Honour the ``COMLRL_TEST_CHECKPOINT_DELAY`` test hook (no-op unless it is set)."""
    raw = os.environ.get(TEST_DELAY_ENV)
    if not raw:
        return
    seconds, _, first = raw.partition("@")
    if sequence < (int(first) if first else 1):
        return
    with open(os.path.join(staging, "PAUSED"), "w", encoding="utf-8") as fh:
        fh.write(str(sequence))
    time.sleep(float(seconds))
    os.unlink(os.path.join(staging, "PAUSED"))


def kill_point(stage: str) -> None:
    """Honour the ``COMLRL_TEST_CHECKPOINT_KILL`` test hook (no-op unless it is set)."""
    raw = os.environ.get(TEST_KILL_ENV)
    if not raw:
        return
    want, _, nth = raw.partition(":")
    if want not in KILL_STAGES or not (nth or "1").isdigit():
        raise ValueError(
            f"{TEST_KILL_ENV}={raw!r}: expected STAGE[:N] with STAGE one of {list(KILL_STAGES)}."
        )
    _stage_counts[stage] = _stage_counts.get(stage, 0) + 1
    if want == stage and _stage_counts[stage] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
