"""Opening a checkpoint: check it is complete and intact before anything is loaded from it.

Opening reads the small JSON files, then compares every file against the sizes and SHA-256
digests the manifest recorded when it was written. A truncated, altered or missing file is a
:class:`CorruptCheckpointError` that names the file; torch and safetensors never see bad bytes.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from comlrl.core.checkpoint.codec import read_json
from comlrl.core.checkpoint.errors import CheckpointError, CorruptCheckpointError
from comlrl.core.checkpoint.layout import MANIFEST, OWNER, STATE

FORMAT = "comlrl-checkpoint"
VERSION = 1

_MANIFEST_KEYS = {
    "format": str,
    "version": int,
    "sequence": int,
    "run_id": str,
    "reason": str,
    "trainer": str,
    "cursor": dict,
    "files": dict,
    "fingerprint": dict,
}


def file_sha256(path: str, chunk: int = 1 << 22) -> str:
    """SHA-256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def read_owner(path: str) -> dict[str, Any] | None:
    """The owner record of a checkpoint or staging dir, or None if it has none or it is bad."""
    owner = os.path.join(path, OWNER)
    if not os.path.isfile(owner):
        return None
    try:
        data = read_json(owner, tagged=False)
    except CorruptCheckpointError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        return None
    return data


class CheckpointReader:
    """A validated, read-only view of one checkpoint directory."""

    def __init__(self, path: str, *, verify: bool = True):
        self.path = os.path.abspath(os.fspath(path))
        if not os.path.isdir(self.path):
            raise CheckpointError(f"{self.path}: no such checkpoint directory.")
        if not os.path.isfile(os.path.join(self.path, MANIFEST)):
            raise CorruptCheckpointError(
                f"{self.path}: incomplete checkpoint (no {MANIFEST}); it was not fully written."
            )
        self.manifest = read_json(os.path.join(self.path, MANIFEST), tagged=False)
        self._check_manifest()
        owner = read_owner(self.path)
        if owner is None or owner.get("run_id") != self.run_id:
            raise CorruptCheckpointError(
                f"{self.path}: {OWNER} is missing or names another run than the manifest."
            )
        if verify:
            self.verify_files()
        self.state = read_json(self._file(STATE))

    # ------------------------------------------------------------------ identity
    def _check_manifest(self) -> None:
        m = self.manifest
        if not isinstance(m, dict):
            raise CorruptCheckpointError(f"{self.path}/{MANIFEST}: expected a JSON object.")
        if m.get("format") != FORMAT:
            raise CorruptCheckpointError(
                f"{self.path}: not a CoMLRL checkpoint ({MANIFEST} format is {m.get('format')!r})."
            )
        for key, kind in _MANIFEST_KEYS.items():
            if not isinstance(m.get(key), kind) or isinstance(m.get(key), bool):
                raise CorruptCheckpointError(
                    f"{self.path}/{MANIFEST}: field {key!r} should be a {kind.__name__}, "
                    f"got {m.get(key)!r}."
                )
        if m["version"] != VERSION:
            raise CheckpointError(
                f"{self.path}: checkpoint format version {m['version']} is not supported by this "
                f"CoMLRL (it reads version {VERSION})."
            )
        if STATE not in m["files"]:
            raise CorruptCheckpointError(f"{self.path}/{MANIFEST}: lists no {STATE}.")

    @property
    def run_id(self) -> str:
        """The id of the run that wrote this checkpoint."""
        return self.manifest["run_id"]

    @property
    def sequence(self) -> int:
        """This checkpoint's sequence number within its run."""
        return self.manifest["sequence"]

    @property
    def cursor(self) -> tuple[int, int]:
        """(epoch, position): where training continues."""
        c = self.manifest["cursor"]
        return int(c["epoch"]), int(c["position"])

    # ------------------------------------------------------------------ files
    def verify_files(self) -> None:
        """Compare every listed file with its recorded size and SHA-256."""
        for rel, info in sorted(self.manifest["files"].items()):
            full = self._file(rel)
            if not os.path.isfile(full):
                raise CorruptCheckpointError(f"{full}: file is missing from the checkpoint.")
            size = os.path.getsize(full)
            if size != info.get("size"):
                raise CorruptCheckpointError(
                    f"{full}: {size} bytes on disk, {info.get('size')} were written "
                    "(truncated or replaced)."
                )
            if file_sha256(full) != info.get("sha256"):
                raise CorruptCheckpointError(
                    f"{full}: contents do not match the SHA-256 recorded at save time (corrupted)."
                )

    def _file(self, rel: str) -> str:
        full = os.path.normpath(os.path.join(self.path, rel))
        if not full.startswith(self.path + os.sep):
            raise CorruptCheckpointError(f"{self.path}: file entry {rel!r} points outside.")
        return full

    def path_of(self, rel: str) -> str:
        """The absolute path of a file the manifest lists."""
        if rel not in self.manifest["files"]:
            raise CorruptCheckpointError(f"{self.path}: {rel} is not part of this checkpoint.")
        return self._file(rel)

    def tensors(self, rel: str) -> dict[str, torch.Tensor]:
        """All tensors of one safetensors file, on CPU."""
        full = self.path_of(rel)
        try:
            return load_file(full, device="cpu")
        except (SafetensorError, OSError) as exc:
            raise CorruptCheckpointError(f"{full}: unreadable safetensors file ({exc}).") from exc

    def shapes(self, rel: str) -> dict[str, list[int]]:
        """Tensor names and shapes of one safetensors file (header only)."""
        full = self.path_of(rel)
        try:
            with safe_open(full, framework="pt") as fh:
                return {k: list(fh.get_slice(k).get_shape()) for k in fh.keys()}
        except (SafetensorError, OSError) as exc:
            raise CorruptCheckpointError(f"{full}: unreadable safetensors file ({exc}).") from exc


def read_checkpoint_metadata(path: str) -> dict[str, Any]:
    """Identity of a checkpoint without loading tensors: sequence, run id, W&B id, and the
    manifest's cursor (epoch, position, global batch, env step).

    ``path`` may be anything :func:`~comlrl.core.checkpoint.layout.resolve_checkpoint` accepts.
    """
    from comlrl.core.checkpoint.layout import resolve_checkpoint

    reader = CheckpointReader(resolve_checkpoint(path), verify=False)
    logger = reader.state.get("logger", {})
    return {
        "path": reader.path,
        "version": reader.manifest["version"],
        "trainer": reader.manifest["trainer"],
        "sequence": reader.sequence,
        "run_id": reader.run_id,
        "reason": reader.manifest["reason"],
        **reader.manifest["cursor"],
        "wandb_run_id": logger.get("wandb_run_id"),
        "run_dir": logger.get("run_dir"),
    }
