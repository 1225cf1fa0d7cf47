"""Device plans and the persistent per-agent workers."""

import threading

import pytest
import torch

from comlrl.core.placement.devices import (
    AgentWorkers,
    normalize_parallel_training,
    plan_devices,
    resolve_devices,
    resolve_single_device,
    uses_parallel_workers,
)


def test_parallel_modes():
    assert normalize_parallel_training(None) == "none"
    assert normalize_parallel_training(" Null ") == "none"
    assert normalize_parallel_training("MP") == "mp"
    with pytest.raises(ValueError, match="parallel_training"):
        normalize_parallel_training("ddp")


def test_resolve_devices_forms():
    cpu = torch.device("cpu")
    assert resolve_devices("cpu", 3) == [cpu] * 3
    assert resolve_devices(["cpu"], 2) == [cpu] * 2
    assert resolve_devices(["cpu", "meta"], 2) == [cpu, torch.device("meta")]
    with pytest.raises(ValueError, match="agent_devices length"):
        resolve_devices(["cpu", "cpu", "cpu"], 2)
    with pytest.raises(ValueError, match="non-empty"):
        resolve_devices([], 2)
    with pytest.raises(ValueError, match="Unsupported"):
        resolve_devices(3.5, 2)


def test_single_device_mode_rejects_several_devices():
    assert resolve_single_device("cpu") == torch.device("cpu")
    assert resolve_single_device(["cpu", "cpu"]) == torch.device("cpu")
    with pytest.raises(ValueError, match="parallel_training='mp'"):
        resolve_single_device(["cpu", "meta"])
    assert plan_devices("none", None, 2) == [resolve_single_device(None)] * 2


def test_workers_only_for_several_distinct_devices():
    assert not uses_parallel_workers("mp", [torch.device("cpu")] * 2)
    assert uses_parallel_workers("mp", [torch.device("cpu"), torch.device("meta")])
    assert not uses_parallel_workers("none", [torch.device("cpu"), torch.device("meta")])


def test_workers_keep_agent_order_and_are_reused():
    workers = AgentWorkers(3, enabled=True)
    seen = []

    def job(i, arg):
        seen.append((i, threading.current_thread().name))
        return arg * 10 + i

    first = workers.map(job, [1, 2, 3])
    threads_first = dict(seen)
    seen.clear()
    second = workers.map(job, [4, 5, 6])
    workers.close()
    assert first == [10, 21, 32] and second == [40, 51, 62]
    assert dict(seen) == threads_first  # the same thread serves each agent every time
    assert len(set(threads_first.values())) == 3


def test_worker_error_propagates():
    workers = AgentWorkers(2, enabled=True)

    def job(i, arg):
        if i == 1:
            raise KeyError("agent 1 failed")
        return i

    with pytest.raises(KeyError, match="agent 1"):
        workers.map(job)
    workers.close()
