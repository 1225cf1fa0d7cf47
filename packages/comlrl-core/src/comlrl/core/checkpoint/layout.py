"""Names on disk, and how a user's resume argument finds a checkpoint.

::

    <checkpoint_dir>/
      latest                  # text: the name of the newest complete checkpoint
      checkpoint-<seq>/       # seq counts saves over the whole run (resumes continue it)
        owner.json            # {"run_id", "sequence"}: which run wrote it
        manifest.json         # written last: identity, cursor, fingerprint, file sizes + digests
        state.json            # every non-tensor value (run state, family state, RNG, ...)
        rng.safetensors       # torch/NumPy/CUDA generator states
        models/<name>/        # model.safetensors (+ config.json, generation_config.json, tokenizer)
        optimizers/optimizer_<i>.safetensors
      .staging-checkpoint-<seq>-*/   # a save in progress (or one killed mid-write)
"""

from __future__ import annotations

import os
import re

from comlrl.core.checkpoint.errors import CheckpointError

MANIFEST = "manifest.json"
OWNER = "owner.json"
STATE = "state.json"
RNG_FILE = "rng.safetensors"
LATEST = "latest"
PREFIX = "checkpoint-"
STAGING_PREFIX = ".staging-"
TRASH_PREFIX = ".trash-"

_NAME = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_name(sequence: int) -> str:
    """Directory name of the checkpoint with this sequence number."""
    return f"{PREFIX}{sequence}"


def parse_sequence(name: str) -> int | None:
    """The sequence number in a ``checkpoint-<n>`` name, else None."""
    match = _NAME.match(name)
    return int(match.group(1)) if match else None


def list_checkpoints(directory: str) -> list[tuple[int, str]]:
    """``(sequence, path)`` of every ``checkpoint-<n>`` directory, oldest first."""
    if not os.path.isdir(directory):
        return []
    found = []
    for name in os.listdir(directory):
        seq = parse_sequence(name)
        path = os.path.join(directory, name)
        if seq is not None and os.path.isdir(path) and not os.path.islink(path):
            found.append((seq, path))
    return sorted(found)


def is_complete(path: str) -> bool:
    """Whether ``path`` holds a published checkpoint (its manifest is written last)."""
    return os.path.isfile(os.path.join(path, MANIFEST))


def read_latest(directory: str) -> str | None:
    """The checkpoint that ``<directory>/latest`` names, or None when there is no pointer."""
    pointer = os.path.join(directory, LATEST)
    if not os.path.isfile(pointer):
        return None
    with open(pointer, encoding="utf-8") as fh:
        name = fh.read().strip()
    if parse_sequence(name) is None:
        raise CheckpointError(
            f"{pointer} should name a checkpoint-<n> directory, but holds {name!r}."
        )
    return os.path.join(directory, name)


def newest_complete(directory: str) -> str | None:
    """The complete checkpoint with the highest sequence in ``directory``, or None."""
    complete = [path for _, path in list_checkpoints(directory) if is_complete(path)]
    return complete[-1] if complete else None


def _holds_checkpoints(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, LATEST)) or bool(list_checkpoints(directory))


def resolve_latest(directory: str) -> str:
    """The checkpoint to resume from in a directory of checkpoints.

    That is what ``latest`` names, unless a newer complete checkpoint exists or the pointer is
    missing or names nothing: a process killed after publishing a checkpoint but before moving
    the pointer leaves exactly that, and the newest complete checkpoint is then the right one.
    """
    pointed = read_latest(directory)
    newest = newest_complete(directory)
    if pointed is not None and is_complete(pointed):
        pointed_seq = parse_sequence(os.path.basename(pointed))
        newest_seq = None if newest is None else parse_sequence(os.path.basename(newest))
        if newest_seq is None or (pointed_seq is not None and pointed_seq >= newest_seq):
            return pointed
    if newest is not None:
        return newest
    if pointed is not None:
        raise CheckpointError(
            f"{os.path.join(directory, LATEST)} points at {pointed}, which is not a complete "
            "checkpoint, and the directory holds no other complete checkpoint."
        )
    raise CheckpointError(f"{directory} holds no complete checkpoint to resume from.")


def resolve_checkpoint(path: str | os.PathLike, checkpoint_dir: str | None = None) -> str:
    """Turn a resume argument into the directory of one complete checkpoint.

    Accepted: a checkpoint directory; a ``latest`` pointer file; a directory of checkpoints; a
    run directory with ``checkpoints/``; or the word ``"latest"``, meaning the newest complete
    checkpoint of ``checkpoint_dir``. In a directory of checkpoints, ``latest`` names the
    checkpoint unless a newer complete one exists (see :func:`resolve_latest`).
    """
    text = os.fspath(path)
    if text == LATEST:
        if checkpoint_dir is None:
            raise ValueError(
                "resume_from_checkpoint='latest' needs checkpoint_dir to say where to look."
            )
        if not os.path.isdir(checkpoint_dir):
            raise CheckpointError(
                f"resume_from_checkpoint='latest': checkpoint_dir {checkpoint_dir} does not exist."
            )
        return os.path.normpath(resolve_latest(checkpoint_dir))
    if os.path.isfile(text) and os.path.basename(text) == LATEST:
        return os.path.normpath(resolve_latest(os.path.dirname(text) or "."))
    if not os.path.isdir(text):
        raise CheckpointError(f"resume_from_checkpoint: {text} does not exist.")
    if os.path.isfile(os.path.join(text, MANIFEST)) or os.path.isfile(os.path.join(text, OWNER)):
        return os.path.normpath(text)
    if _holds_checkpoints(text):
        return os.path.normpath(resolve_latest(text))
    nested = os.path.join(text, "checkpoints")
    if os.path.isdir(nested) and _holds_checkpoints(nested):
        return os.path.normpath(resolve_latest(nested))
    raise CheckpointError(
        f"{text} is neither a checkpoint (no {MANIFEST}) nor a directory of checkpoints (or one "
        "with checkpoints/); no complete checkpoint there."
    )
