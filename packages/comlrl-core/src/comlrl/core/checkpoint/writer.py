"""Writing one checkpoint of a trainer: every component into a staging dir, then publish."""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import TYPE_CHECKING, Any

from safetensors.torch import save_file

from comlrl.core.checkpoint.atomic import (
    kill_point,
    make_staging,
    pause_for_tests,
    publish,
    publish_replacing,
    write_latest,
)
from comlrl.core.checkpoint.codec import dumps
from comlrl.core.checkpoint.errors import CheckpointError
from comlrl.core.checkpoint.layout import MANIFEST, OWNER, RNG_FILE, STATE, checkpoint_name
from comlrl.core.checkpoint.modules import WEIGHTS_FILE, alias_map, save_module
from comlrl.core.checkpoint.optimizer_state import optimizer_payload
from comlrl.core.checkpoint.reader import FORMAT, VERSION, file_sha256
from comlrl.core.checkpoint.rng import capture_rng
from comlrl.core.loop.run_state import RunState

if TYPE_CHECKING:
    from comlrl.core.trainer import TrainerBase


def _write_text(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def _encode_state(state: dict[str, Any]) -> str:
    try:
        return dumps(state, "state")
    except TypeError as exc:
        raise CheckpointError(f"Cannot save the trainer's resumable state: {exc}") from exc


def _file_table(root: str) -> dict[str, dict[str, Any]]:
    table = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel == MANIFEST:
                continue
            table[rel] = {"size": os.path.getsize(full), "sha256": file_sha256(full)}
    return dict(sorted(table.items()))


def _write_components(trainer: TrainerBase, staging: str, sequence: int) -> dict[str, Any]:
    """Models, optimizers and schedulers; returns their plain-data descriptions."""
    models = trainer.trainable_models()
    aliases = alias_map(models)
    tokenizers = trainer.checkpoint_tokenizers()
    model_meta: dict[str, Any] = {}
    for name, model in models.items():
        if aliases[name]:
            model_meta[name] = {"same_as": aliases[name]}
            continue
        rel = f"models/{name}"
        meta = save_module(model, os.path.join(staging, rel), tokenizers.get(name))
        meta["file"] = f"{rel}/{WEIGHTS_FILE}"
        model_meta[name] = meta
    pause_for_tests(staging, sequence)
    kill_point("weights")
    optim_meta = []
    for i, optimizer in enumerate(trainer.optimizers_list()):
        tensors, meta = optimizer_payload(optimizer)
        rel = f"optimizers/optimizer_{i}.safetensors"
        os.makedirs(os.path.join(staging, "optimizers"), exist_ok=True)
        save_file(tensors, os.path.join(staging, rel), metadata={"format": "pt"})
        meta["file"] = rel
        optim_meta.append(meta)
    return {
        "models": model_meta,
        "optimizers": optim_meta,
    }


def write_checkpoint(trainer: TrainerBase, directory: str, *, sequence: int, **fields: Any) -> str:
    """Write ``<directory>/checkpoint-<sequence>`` atomically, point ``latest`` at it, and
    return its path. ``fields`` are :func:`write_checkpoint_at`'s (``run_id``, ``reason``,
    ``fingerprint``, ``loop_state``, ``logger_state``). On any failure the staging dir is
    removed and nothing is published."""
    target = os.path.join(directory, checkpoint_name(sequence))
    if os.path.lexists(target):
        raise FileExistsError(f"Refusing to overwrite the existing checkpoint {target}.")
    write_checkpoint_at(trainer, target, sequence=sequence, **fields)
    write_latest(directory, os.path.basename(target))
    kill_point("latest")
    return target


def write_checkpoint_at(
    trainer: TrainerBase,
    target: str,
    *,
    sequence: int,
    run_id: str,
    reason: str,
    fingerprint: dict[str, Any],
    loop_state: dict[str, Any],
    logger_state: dict[str, Any],
    replace: bool = False,
) -> str:
    """Write one checkpoint into the directory ``target`` atomically (staged next to it, then
    renamed into place) and return its path; with ``replace`` a checkpoint already at
    ``target`` is swapped out in the same step. On any failure the staging dir is removed and
    nothing is published (a replaced checkpoint stays as it was)."""
    rng_tensors, rng_meta = capture_rng()
    staging = make_staging(os.path.dirname(target) or ".", sequence)
    try:
        kill_point("staging")
        _write_text(
            os.path.join(staging, OWNER), json.dumps({"run_id": run_id, "sequence": sequence})
        )
        kill_point("owner")
        state = _write_components(trainer, staging, sequence)
        save_file(rng_tensors, os.path.join(staging, RNG_FILE), metadata={"format": "pt"})
        state.update(
            rng=rng_meta,
            loop=loop_state,
            family=trainer.state_dict(),
            callbacks={
                n: obj.state_dict() for n, obj in trainer.checkpointing.callbacks(trainer).items()
            },
            logger=logger_state,
        )
        _write_text(os.path.join(staging, STATE), _encode_state(state))
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "sequence": sequence,
            "run_id": run_id,
            "reason": reason,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "trainer": fingerprint["trainer"],
            "cursor": RunState.manifest_cursor(loop_state["run"]),
            "files": _file_table(staging),
            "fingerprint": fingerprint,
        }
        _write_text(os.path.join(staging, MANIFEST), json.dumps(manifest, indent=1))
        kill_point("manifest")
        if replace:
            publish_replacing(staging, target)
        else:
            publish(staging, target)
    except BaseException:
        if os.path.isdir(staging):
            shutil.rmtree(staging)
        raise
    kill_point("published")
    return target
