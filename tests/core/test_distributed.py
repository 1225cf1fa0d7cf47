"""Launcher-environment resolution and the gloo collectives used by data-parallel training."""

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from comlrl.core.distributed import (
    DistributedContext,
    TorchrunScheduler,
    all_reduce_gradients,
    reduce_metrics,
    resolve_mode,
    shard_range,
)

FULL = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500"}


def test_auto_mode_from_environment():
    assert resolve_mode("auto", {}) == "single"
    assert resolve_mode("auto", {"WORLD_SIZE": "1"}) == "single"
    assert resolve_mode("auto", FULL) == "ddp"
    assert TorchrunScheduler(FULL).resolve_mode() == "ddp"
    assert resolve_mode("single", FULL) == "single"


def test_incomplete_environment_is_named():
    env = dict(FULL)
    del env["MASTER_PORT"], env["RANK"]
    with pytest.raises(ValueError, match=r"missing \['RANK', 'MASTER_PORT'\]"):
        resolve_mode("auto", env)
    with pytest.raises(ValueError, match="WORLD_SIZE must be an integer"):
        resolve_mode("auto", {"WORLD_SIZE": "two"})
    with pytest.raises(ValueError, match="distributed mode"):
        resolve_mode("fsdp", {})
    with pytest.raises(ValueError, match="WORLD_SIZE >= 2"):
        resolve_mode("ddp", {**FULL, "WORLD_SIZE": "1"})


@pytest.mark.parametrize("count, world", [(8, 2), (7, 2), (3, 4), (10, 3)])
def test_shards_partition_the_batch(count, world):
    slices = [shard_range(5, count, DistributedContext(rank=r, world_size=world))
              for r in range(world)]
    covered = [i for b, e in slices for i in range(b, e)]
    assert covered == list(range(5, 5 + count))
    sizes = [e - b for b, e in slices]
    assert max(sizes) - min(sizes) <= 1


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, out):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    ctx = DistributedContext(rank=rank, world_size=world, backend="gloo")
    lin = torch.nn.Linear(3, 2)
    torch.nn.init.constant_(lin.weight, 1.0)
    torch.nn.init.constant_(lin.bias, 0.0)
    x = torch.full((1, 3), float(rank + 1))
    lin(x).sum().backward()
    all_reduce_gradients(list(lin.parameters()), ctx, weight=1.0 / world)
    metrics = reduce_metrics({"a": float(rank), "b": 2.0}, ctx)
    out[rank] = (lin.weight.grad.clone(), lin.bias.grad.clone(), metrics)
    torch.distributed.destroy_process_group()


def test_gradients_and_metrics_are_averaged_over_ranks():
    world = 2
    manager = mp.Manager()
    out = manager.dict()
    mp.spawn(_worker, args=(world, _free_port(), out), nprocs=world, join=True)
    w0, b0, m0 = out[0]
    w1, b1, m1 = out[1]
    assert torch.equal(w0, w1) and torch.equal(b0, b1)
    assert torch.allclose(w0, torch.full((2, 3), 1.5))  # mean of inputs 1 and 2
    assert torch.allclose(b0, torch.ones(2))
    assert m0 == m1 == {"a": 0.5, "b": 2.0}
