"""Where this process stands in a multi-process run: the launcher's environment (``accelerate
launch`` or ``torchrun`` export ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT``), the mode it resolves to, the process group, this rank's shard of a range of
items and the seed of one item, which depends on no rank."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

MODES = ("auto", "single", "ddp", "fsdp")


_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands in a multi-process run (rank 0 of 1 when alone)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None
    # "fsdp" when the agents are sharded with FSDP2 (comlrl.core.distributed.sharding); None: replicated.
    sharding: str | None = None

    @property
    def is_main(self) -> bool:
        """Whether this process logs and saves."""
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        """Whether a process group spans more than one process."""
        return self.world_size > 1


def local_context() -> DistributedContext:
    """The context of a plain single-process run."""
    return DistributedContext()


def resolve_mode(mode: str = "auto", env: Mapping[str, str] | None = None) -> str:
    """``auto`` → ``ddp`` when the launcher says WORLD_SIZE > 1 (``fsdp`` when an accelerate
    FSDP config asked for sharding), else ``single``.

    An incomplete launcher environment (some variables set, others missing) is an error that lists
    what is missing, rather than a hang in ``init_process_group``.
    """
    env = os.environ if env is None else env
    key = str(mode).strip().lower()
    if key not in MODES:
        raise ValueError(f"distributed mode must be one of {list(MODES)}, got {mode!r}.")
    raw = env.get("WORLD_SIZE")
    try:
        world = int(raw) if raw is not None else 1
    except ValueError as exc:
        raise ValueError(f"WORLD_SIZE must be an integer, got {raw!r}.") from exc
    if key == "single":
        return "single"
    if key == "auto" and world <= 1:
        return "single"
    missing = [v for v in _LAUNCH_VARS if not env.get(v)]
    if missing:
        raise ValueError(
            f"Multi-process training needs the launcher variables {list(_LAUNCH_VARS)}; missing "
            f"{missing}. Start the run with `accelerate launch` or `torchrun`."
        )
    if world < 2 and key in ("ddp", "fsdp"):
        raise ValueError(f"distributed mode {key!r} needs WORLD_SIZE >= 2; use 'auto' or 'single'.")
    if key == "auto":
        return "fsdp" if _flag(env, "ACCELERATE_USE_FSDP") else "ddp"
    return key


def _flag(env: Mapping[str, str], var: str) -> bool:
    return str(env.get(var, "")).strip().lower() in ("1", "true", "yes")


def check_sharding_request(env: Mapping[str, str] | None = None) -> None:
    """Check what an accelerate config asks of sharding (``accelerate launch`` exports it).

    DeepSpeed is refused (use the FSDP2 config for the same memory savings). FSDP must be
    version 2 without parameter offload; a request to re-shard parameters after every forward
    (ZeRO-3 style) is met with gathered parameters during training, which a warning says.
    """
    env = os.environ if env is None else env
    if _flag(env, "ACCELERATE_USE_DEEPSPEED"):
        raise ValueError(
            "The launcher asks for DeepSpeed (ACCELERATE_USE_DEEPSPEED), which CoMLRL does not "
            "drive. Launch with the FSDP2 config (examples/accelerate/fsdp2.yaml: sharded "
            "optimizer state and gradients, like ZeRO-2) or the DDP config; see "
            "docs/distributed.md."
        )
    if not _flag(env, "ACCELERATE_USE_FSDP"):
        return
    version = str(env.get("FSDP_VERSION", "2")).strip()
    if version != "2":
        raise ValueError(
            f"The launcher asks for FSDP version {version} (FSDP_VERSION); CoMLRL shards with "
            "FSDP2: set fsdp_version: 2 in the accelerate config."
        )
    if _flag(env, "FSDP_OFFLOAD_PARAMS"):
        raise ValueError(
            "The launcher asks for FSDP parameter offload (FSDP_OFFLOAD_PARAMS), which CoMLRL "
            "does not support: set fsdp_offload_params: false."
        )
    if _flag(env, "FSDP_RESHARD_AFTER_FORWARD"):
        warnings.warn(
            "The FSDP config asks to re-shard parameters after every forward (ZeRO-3 style). "
            "CoMLRL keeps each agent's parameters gathered while it trains (ranks decode and "
            "micro-batch different amounts), sharding gradients and optimizer state only; set "
            "fsdp_reshard_after_forward: false to say so.",
            stacklevel=3,
        )


def check_mixed_precision_request(env: Mapping[str, str] | None = None) -> None:
    """Warn when the accelerate config asks for mixed precision: CoMLRL takes it from the
    config's ``bf16`` field, not from the launcher."""
    env = os.environ if env is None else env
    mode = str(env.get("ACCELERATE_MIXED_PRECISION", "no")).strip().lower()
    if mode not in ("", "no"):
        warnings.warn(
            f"The launcher asks for mixed precision ({mode!r}, ACCELERATE_MIXED_PRECISION), which "
            "CoMLRL does not read from the launcher: set bf16=True in the trainer config (bf16 "
            "compute with fp32 master weights) instead.",
            stacklevel=3,
        )


def init_context(mode: str = "auto", env: Mapping[str, str] | None = None) -> DistributedContext:
    """Create (or join) the process group the launcher describes; returns the context."""
    env = os.environ if env is None else env
    check_sharding_request(env)
    check_mixed_precision_request(env)
    resolved = resolve_mode(mode, env)
    if resolved == "single":
        return local_context()
    rank, world, local = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"])
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local)  # this rank's GPU, for NCCL and for default placement
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(
            backend=backend, init_method="env://", rank=rank, world_size=world
        )
    return DistributedContext(
        rank=rank,
        world_size=world,
        local_rank=local,
        backend=backend,
        sharding="fsdp" if resolved == "fsdp" else None,
    )


def shard_range(start: int, count: int, ctx: DistributedContext) -> tuple[int, int]:
    """This rank's contiguous slice ``[begin, end)`` of the global items ``[start, start+count)``.

    Slices differ by at most one item; a rank may get none when count < world size.
    """
    base, extra = divmod(count, ctx.world_size)
    begin = start + ctx.rank * base + min(ctx.rank, extra)
    return begin, begin + base + (1 if ctx.rank < extra else 0)


def item_seed(*parts: int) -> int:
    """A 63-bit seed that depends only on ``parts`` (run seed, epoch, global item index, turn,
    branch, agent...), never on which rank or batch position generates the item."""
    import hashlib

    text = ",".join(str(int(p)) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def unwrap_model(model: Any) -> Any:
    """The model inside a DDP/accelerate wrapper (``.module``), or the model itself."""
    return getattr(model, "module", model)


class TorchrunScheduler:
    """CoMLRL 1.4.3 compatible mode resolution: ``auto`` → single process or DDP, from the
    launcher's environment."""

    def __init__(self, env: Mapping[str, str] | None = None):
        self.env = env

    def resolve_mode(self, mode: str = "auto") -> str:
        """``"single"`` or ``"ddp"``."""
        return resolve_mode(mode, self.env)

    def context(self, mode: str = "auto") -> DistributedContext:
        """Initialise and return the process context."""
        return init_context(mode, self.env)
