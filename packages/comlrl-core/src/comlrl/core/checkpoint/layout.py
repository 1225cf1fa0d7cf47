"""Names on disk, and how a user's resume argument finds a checkpoint.

::

    <checkpoint_dir>/
      latest                  # text: the name of the newest complete checkpoint
      checkpoint-<seq>/       # seq counts saves over the whole run (resumes continue it)
        owner.json            # {"run_id", "sequence"}: which run wrote it
        manifest.json         # written last: identity, cursor, fingerprint, file sizes + digests
        state.json            # every non-tensor value (cursor, env_step, family state, RNG, ...)
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


def resolve_checkpoint(path: str | os.PathLike, checkpoint_dir: str | None = None) -> str:
    """Turn a resume argument into the directory of one complete checkpoint.

    Accepted: a checkpoint directory; a ``latest`` pointer file; a checkpoint dir that holds
    ``latest``; a run directory with ``checkpoints/latest``; or the word ``"latest"``, meaning
    ``<checkpoint_dir>/latest``.
    """
    text = os.fspath(path)
    if text == LATEST:
        if checkpoint_dir is None:
            raise ValueError(
                "resume_from_checkpoint='latest' needs checkpoint_dir to say where to look."
            )
        text = os.path.join(checkpoint_dir, LATEST)
    candidates = []
    if os.path.isfile(text) and os.path.basename(text) == LATEST:
        target = read_latest(os.path.dirname(text) or ".")
        candidates.append(target)
    elif os.path.isdir(text):
        if os.path.isfile(os.path.join(text, MANIFEST)) or os.path.isfile(
            os.path.join(text, OWNER)
        ):
            candidates.append(text)
        elif os.path.isfile(os.path.join(text, LATEST)):
            candidates.append(read_latest(text))
        elif os.path.isfile(os.path.join(text, "checkpoints", LATEST)):
            candidates.append(read_latest(os.path.join(text, "checkpoints")))
        else:
            raise CheckpointError(
                f"{text} is neither a checkpoint (no {MANIFEST}) nor a directory with a "
                f"'{LATEST}' pointer (or checkpoints/{LATEST}); no complete checkpoint there."
            )
    else:
        raise CheckpointError(f"resume_from_checkpoint: {text} does not exist.")
    target = candidates[0]
    if not os.path.isdir(target):
        raise CheckpointError(f"{text} points at {target}, which does not exist.")
    return os.path.normpath(target)
