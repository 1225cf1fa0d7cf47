"""The run directory of ``comlrl train``: refuse to reuse one, write it only once checks pass.

A fresh run refuses a run directory that already holds anything, and a checkpoint directory
that already holds checkpoints; the message says, in command-line terms, how to continue the
old run or start a new one. The run's ``config.yaml`` (secrets redacted) is written only after
the trainer accepted every setting and the checkpoint session passed its checks, and a run that
fails before that point removes the directories it created, so a refused run leaves no trace.
"""

from __future__ import annotations

import os
import shlex
import shutil
from typing import Any

import yaml

from comlrl.core.checkpoint.layout import list_checkpoints, newest_complete
from comlrl.core.config.redact import redact

CONFIG_FILE = "config.yaml"


def resume_command(run_dir: str) -> str:
    """The command that continues the run in ``run_dir`` (its config.yaml holds the settings)."""
    return f"comlrl train --resume {shlex.quote(run_dir)}"


def check_fresh(run_dir: str, checkpoint_dir: str | None) -> None:
    """Refuse a fresh run whose run or checkpoint directory belongs to an earlier run."""
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise FileExistsError(
            f"output: the run directory {run_dir} exists and is not a directory; choose another "
            "run with --set output.run_name=<new name>."
        )
    held = sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []
    old_checkpoints = checkpoint_dir is not None and bool(list_checkpoints(checkpoint_dir))
    if not held and not old_checkpoints:
        return
    where = checkpoint_dir if old_checkpoints else run_dir
    resumable = checkpoint_dir is not None and newest_complete(checkpoint_dir) is not None
    if resumable:
        advice = f"continue it with `{resume_command(run_dir)}`, or start"
    else:
        advice = "it has no complete checkpoint to resume from; delete it, or start"
    shown = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "") if held else "checkpoints"
    raise FileExistsError(
        f"{where} already holds an earlier run ({shown}); {advice} a new run with "
        "--set output.run_name=<new name>. Nothing was changed."
    )


def write_config(run_dir: str, run: dict[str, Any]) -> None:
    """Write ``<run_dir>/config.yaml`` without secrets (atomically: no half-written file)."""
    os.makedirs(run_dir, exist_ok=True)
    final = os.path.join(run_dir, CONFIG_FILE)
    tmp = final + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        yaml.safe_dump(redact(run), fh, sort_keys=False)
    os.replace(tmp, final)


def _holds_data(path: str) -> bool:
    for _dirpath, _dirs, files in os.walk(path):
        for name in files:
            if os.path.getsize(os.path.join(_dirpath, name)) > 0:
                return True
    return False


def remove_if_unused(run_dir: str) -> bool:
    """Remove ``run_dir`` if it holds no data (only empty files and directories); returns
    whether it was removed. Used when a run that created the directory failed its checks."""
    if not os.path.isdir(run_dir) or _holds_data(run_dir):
        return False
    shutil.rmtree(run_dir)
    return True
