"""Policy snapshots of the iterative trainers (the ``history`` comparator reads them).

``initial/agent_i`` holds the policy before training and ``iteration_NNNN/agent_i`` the policy
after iteration NNNN; iterations are numbered from 1 here, as in the replay and distribution
files.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Any

from comlrl.core.logging.reporting import open_run_log
from comlrl.core.models import freeze_model, load_causal_lm
from comlrl.core.quiet import quiet_hub_progress

INITIAL = "initial"


def run_subdir(trainer: Any, configured: str | None, sub: str) -> str:
    """``configured`` (absolute, user expanded) when set, else ``sub`` of the trainer's run
    directory (the logger is built for it)."""
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    open_run_log(trainer)
    return os.path.abspath(os.path.join(trainer.reporting.run_dir, sub))


def policy_dir(trainer: Any) -> str:
    """Where the policy snapshots of ``trainer`` go (``policy_checkpoint_dir`` or the run's
    ``policy_checkpoints``)."""
    return run_subdir(trainer, trainer.args.policy_checkpoint_dir, "policy_checkpoints")


def snapshot_name(iteration: int) -> str:
    """Directory name of the policy after 1-based ``iteration`` (0 means the initial policy)."""
    return INITIAL if iteration <= 0 else f"iteration_{iteration:04d}"


def save_policy(directory: str, name: str, agents: Sequence[Any], tokenizers: Sequence[Any]) -> str:
    """Save every actor under ``directory/name/agent_i`` (staged, then renamed into place)."""
    target = os.path.join(directory, name)
    staging = os.path.join(directory, f".{name}-staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    for i, (model, tok) in enumerate(zip(agents, tokenizers)):
        path = os.path.join(staging, f"agent_{i}")
        with quiet_hub_progress():
            model.save_pretrained(path)
        tok.save_pretrained(path)
    if os.path.exists(target):
        shutil.rmtree(target)
    os.replace(staging, target)
    return target


def history_snapshot(directory: str, iteration: int, k: int) -> str:
    """The snapshot ``k`` iterations before 1-based ``iteration``: the policy after iteration
    ``iteration - k``, else the newest saved one before it, else the initial policy."""
    for past in range(iteration - k, 0, -1):
        path = os.path.join(directory, snapshot_name(past))
        if os.path.isdir(path):
            return path
    path = os.path.join(directory, INITIAL)
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"no policy snapshot under {directory!r} for the history comparator (expected "
            f"{snapshot_name(max(0, iteration - k))!r} or {INITIAL!r})."
        )
    return path


def load_snapshot_agent(path: str, index: int, model_config: dict | None, device) -> Any:
    """Actor ``index`` of a snapshot, frozen, on ``device``."""
    return freeze_model(load_causal_lm(os.path.join(path, f"agent_{index}"), model_config)).to(
        device
    )
