"""Device plans: which device each agent (or critic, reward/reference model) lives on, and the
persistent per-agent workers that run agents concurrently in ``parallel_training="mp"`` (under a
multi-process launch, :class:`IndexedWorkers`, which tell each worker's code its agent)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

PARALLEL_MODES = ("none", "mp")


def normalize_parallel_training(value: Any) -> str:
    """``None``/"null"/"none" → "none"; "mp" → "mp"; anything else is an error."""
    if value is None:
        return "none"
    key = str(value).strip().lower()
    if key in ("null", ""):
        key = "none"
    if key not in PARALLEL_MODES:
        raise ValueError(f"parallel_training must be one of {list(PARALLEL_MODES)}, got {value!r}.")
    return key


def _auto_device() -> torch.device:
    return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


def check_device_available(device: torch.device, field: str = "agent_devices") -> torch.device:
    """Return ``device`` when this machine has it; otherwise raise a ValueError naming ``field``.

    Only accelerators are checked: placing a model on a missing GPU otherwise fails deep inside
    torch, after the model has been loaded.
    """
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = 0 if device.index is None else device.index
        if index >= count:
            have = (
                f"this machine has {count} CUDA device(s): cuda:0 to cuda:{count - 1}"
                if count
                else "this machine has no CUDA device"
            )
            raise ValueError(
                f"{field}: {str(device)!r} is not available ({have}); use one of those, 'cpu', "
                "or 'auto'."
            )
    elif device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(f"{field}: 'mps' is not available here; use 'cpu' or 'auto'.")
    return device


def resolve_single_device(spec: Any, field: str = "agent_devices") -> torch.device:
    """One device for everything: None/"auto" picks CUDA when present, else the CPU."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "auto"):
        return _auto_device()
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise ValueError(f"{field} must be a non-empty list or 'auto'.")
        distinct = {str(s) for s in spec}
        if len(distinct) > 1:
            raise ValueError(
                f"{field} lists several devices but parallel_training='none' keeps all agents "
                "on one device; set parallel_training='mp' or give one device."
            )
        spec = spec[0]
    return check_device_available(torch.device(spec), field)


def resolve_devices(spec: Any, count: int, field: str = "agent_devices") -> list[torch.device]:
    """One device per model: a string is repeated, a list of 1 broadcast, a list of N used as is."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "auto"):
        n_gpu = torch.cuda.device_count()
        if n_gpu == 0:
            return [torch.device("cpu")] * count
        return [torch.device(f"cuda:{i % n_gpu}") for i in range(count)]
    if isinstance(spec, (str, torch.device)):
        return [check_device_available(torch.device(spec), field)] * count
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise ValueError(f"{field} must be a non-empty list or 'auto'.")
        if len(spec) == 1:
            return [check_device_available(torch.device(spec[0]), field)] * count
        if len(spec) != count:
            raise ValueError(f"{field} length ({len(spec)}) must be 1 or {count}.")
        return [check_device_available(torch.device(s), field) for s in spec]
    raise ValueError(f"Unsupported {field} spec: {spec!r}; use a device string or a list.")


def plan_devices(
    parallel_training: str, spec: Any, count: int, field: str = "agent_devices"
) -> list[torch.device]:
    """Devices for ``count`` models under the given parallel mode."""
    if normalize_parallel_training(parallel_training) == "mp":
        return resolve_devices(spec, count, field)
    return [resolve_single_device(spec, field)] * count


class AgentWorkers:
    """One long-lived worker thread per agent, used when agents sit on different devices.

    ``map`` runs ``fn(i, arg_i)`` for every agent and returns results in agent order. Workers are
    reused across calls (CUDA contexts and caches stay warm). With ``enabled=False`` everything
    runs in the caller's thread, in order.
    """

    def __init__(self, num_agents: int, enabled: bool, name: str = "comlrl-agent"):
        self.num_agents = num_agents
        self.enabled = enabled and num_agents > 1
        self._pools: list[ThreadPoolExecutor] = []
        if self.enabled:
            self._pools = [
                ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-{i}")
                for i in range(num_agents)
            ]

    def map(self, fn: Callable[[int, Any], Any], args: Sequence[Any] | None = None) -> list:
        """Run ``fn`` once per agent; the first error (in agent order) is re-raised."""
        args = list(args) if args is not None else [None] * self.num_agents
        if not self.enabled:
            return [fn(i, a) for i, a in enumerate(args)]
        futures = [self._pools[i].submit(fn, i, a) for i, a in enumerate(args)]
        return [f.result() for f in futures]

    def close(self) -> None:
        """Stop the worker threads."""
        for pool in self._pools:
            pool.shutdown(wait=True)
        self._pools = []

    def __del__(self):
        for pool in self._pools:
            pool.shutdown(wait=False)


_SLOT = threading.local()


def current_worker() -> int | None:
    """The agent index of the :class:`IndexedWorkers` thread running now (None elsewhere)."""
    return getattr(_SLOT, "index", None)


class IndexedWorkers(AgentWorkers):
    """:class:`AgentWorkers` that tells code running inside a worker which agent it serves, so
    collectives of concurrent agents go through per-agent process groups (their order then
    never depends on thread timing)."""

    def map(self, fn, args=None):
        """Like :meth:`AgentWorkers.map`; ``current_worker()`` is ``i`` while ``fn(i, ...)``
        runs."""

        def run(i, arg):
            previous = current_worker()
            _SLOT.index = i
            try:
                return fn(i, arg)
            finally:
                _SLOT.index = previous

        return super().map(run, args)


def uses_parallel_workers(parallel_training: str, devices: Sequence[torch.device]) -> bool:
    """Workers pay off only in mp mode with more than one distinct device."""
    return (
        normalize_parallel_training(parallel_training) == "mp" and len(set(map(str, devices))) > 1
    )


def validate_device_spec(spec: Any, field: str, count: int | None = None) -> None:
    """Check a device spec early (config time): parseable devices, sensible list length."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "auto"):
        return
    items = [spec] if isinstance(spec, (str, torch.device)) else spec
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError(
            f"{field} must be a device string, 'auto', or a non-empty list of them; got {spec!r}."
        )
    for item in items:
        try:
            torch.device(item)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(
                f"{field} has an invalid device {item!r} (e.g. 'cpu', 'cuda:0')."
            ) from exc
    # Lengths only: whether the devices exist is checked when a trainer places its models,
    # since a config may be written on one machine and used on another.
    if count is not None and len(items) not in (1, count):
        raise ValueError(f"{field} length ({len(items)}) must be 1 or {count}.")
