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
    item_seed,
    pooled_mean_std,
    reduce_metrics,
    resolve_mode,
    shard_range,
)
from comlrl.core.distributed.ranks import per_rank_config
from comlrl.core.placement.devices import IndexedWorkers, current_worker
from comlrl.core.rollout import rollouts

FULL = {
    "RANK": "0",
    "WORLD_SIZE": "2",
    "LOCAL_RANK": "0",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
}


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
    with pytest.raises(ValueError, match="distributed mode must be one of"):
        resolve_mode("deepspeed", {})
    with pytest.raises(ValueError, match="WORLD_SIZE >= 2"):
        resolve_mode("ddp", {**FULL, "WORLD_SIZE": "1"})


@pytest.mark.parametrize("count, world", [(8, 2), (7, 2), (3, 4), (10, 3)])
def test_shards_partition_the_batch(count, world):
    slices = [
        shard_range(5, count, DistributedContext(rank=r, world_size=world)) for r in range(world)
    ]
    covered = [i for b, e in slices for i in range(b, e)]
    assert covered == list(range(5, 5 + count))
    sizes = [e - b for b, e in slices]
    assert max(sizes) - min(sizes) <= 1


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, out):
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    ctx = DistributedContext(rank=rank, world_size=world, backend="gloo")
    lin = torch.nn.Linear(3, 2)
    torch.nn.init.constant_(lin.weight, 1.0)
    torch.nn.init.constant_(lin.bias, 0.0)
    x = torch.full((1, 3), float(rank + 1))
    lin(x).sum().backward()
    # one parameter has a gradient on rank 0 only, another on no rank at all
    partial = torch.nn.Parameter(torch.zeros(2))
    unused = torch.nn.Parameter(torch.zeros(2))
    if rank == 0:
        partial.grad = torch.full((2,), 4.0)
    group = torch.distributed.new_group()  # as an agent worker's own group would be
    all_reduce_gradients([*lin.parameters(), partial, unused], ctx, weight=1.0 / world, group=group)
    metrics = reduce_metrics({"a": float(rank), "b": 2.0}, ctx)
    # rank 0 holds [1, 2] of the first group and nothing of the second; rank 1 holds [3, 6]
    # and [5]: the pooled statistics are those of [1, 2, 3, 6] and [5]
    shares = [[1.0, 2.0], []] if rank == 0 else [[3.0, 6.0], [5.0]]
    pooled = pooled_mean_std([torch.tensor(v) for v in shares], ctx, group=group)
    out[rank] = (
        lin.weight.grad.clone(),
        lin.bias.grad.clone(),
        metrics,
        partial.grad.clone(),
        unused.grad is None,
        pooled,
    )
    torch.distributed.destroy_process_group()


def test_gradients_and_metrics_are_averaged_over_ranks():
    world = 2
    manager = mp.Manager()
    out = manager.dict()
    mp.spawn(_worker, args=(world, _free_port(), out), nprocs=world, join=True)
    w0, b0, m0, p0, none0, pooled0 = out[0]
    w1, b1, m1, p1, none1, pooled1 = out[1]
    assert pooled0 == pooled1
    whole = torch.tensor([1.0, 2.0, 3.0, 6.0], dtype=torch.float64)
    (mean, std, count), (mean2, std2, count2) = pooled0
    assert count == 4 and mean == pytest.approx(3.0)
    assert std == pytest.approx(whole.std(unbiased=False).item(), rel=1e-12)
    assert (mean2, std2, count2) == (5.0, 0.0, 1)
    # one process: the same function pools nothing and returns the values' own statistics
    alone = pooled_mean_std([whole], DistributedContext())
    assert alone[0][2] == 4 and alone[0][1] == pytest.approx(std, rel=1e-12)
    assert torch.equal(p0, p1) and torch.equal(p0, torch.full((2,), 2.0))
    assert none0 and none1  # no gradient anywhere: the optimizer keeps skipping it
    assert torch.equal(w0, w1) and torch.equal(b0, b1)
    assert torch.allclose(w0, torch.full((2, 3), 1.5))  # mean of inputs 1 and 2
    assert torch.allclose(b0, torch.ones(2))
    assert m0 == m1 == {"a": 0.5, "b": 2.0}


def _cfg(**kw):
    from comlrl.reinforce import MAGRPOConfig

    base = dict(num_turns=1, rollout_buffer_size=4, train_batch_size=2)
    base.update(kw)
    return MAGRPOConfig(**base)


def test_per_rank_config_divides_global_batches():
    ctx = DistributedContext(rank=1, world_size=2)
    local = per_rank_config(_cfg(rollout_batch_size=6), ctx)
    assert (local.rollout_buffer_size, local.train_batch_size, local.rollout_batch_size) == (
        2,
        1,
        3,
    )
    single = _cfg()
    assert per_rank_config(single, DistributedContext()) is single


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(rollout_buffer_size=3, train_batch_size=3), "rollout_buffer_size=3 .* divisible"),
        (dict(train_batch_size=1), "train_batch_size=1 .* divisible"),
        (dict(early_termination_threshold=0.5), "early_termination_threshold"),
        (dict(nonfinite_loss="skip"), "nonfinite_loss='skip'"),
    ],
)
def test_per_rank_config_refuses_what_ranks_cannot_share(overrides, message):
    with pytest.raises(ValueError, match=message):
        per_rank_config(_cfg(**overrides), DistributedContext(rank=0, world_size=2))


def test_item_seed_depends_only_on_its_parts():
    assert item_seed(0, 1, 5, 0, 1) == item_seed(0, 1, 5, 0, 1)
    seeds = {item_seed(0, e, i, 0, a) for e in range(2) for i in range(4) for a in range(2)}
    assert len(seeds) == 16
    assert all(0 <= s < 2**63 for s in seeds)


def test_indexed_workers_report_their_agent_and_keep_order():
    workers = IndexedWorkers(3, True)
    try:
        seen = workers.map(lambda i, arg: (i, current_worker(), arg), ["a", "b", "c"])
        again = workers.map(lambda i, arg: current_worker())
    finally:
        workers.close()
    assert seen == [(0, 0, "a"), (1, 1, "b"), (2, 2, "c")]
    assert again == [0, 1, 2]
    assert current_worker() is None


def test_item_seeded_sampling_does_not_depend_on_the_batch(tmp_path):
    """An item samples the same completions alone or inside a larger batch (at its global
    index), which is what lets any rank roll out any shard of a global batch."""
    from comlrl.core.testing import tiny_pair
    from comlrl.reinforce import MAGRPOTrainer

    m0, tok = tiny_pair(seed=0)
    items = [{"prompt": "A tale of a cat."}, {"prompt": "The sea at night, in short."}]
    trainer = MAGRPOTrainer(
        agents=[m0],
        num_agents=1,
        tokenizer=tok,
        train_dataset=items,
        reward_func=lambda a: [float(len(x)) for x in a],
        args=_cfg(
            item_seeded_sampling=True,
            max_new_tokens=8,
            temperature=1.0,
            top_p=1.0,
            top_k=None,
            num_generations=3,
            output_dir=str(tmp_path / "run"),
        ),
    )
    params = rollouts.sampling_params(trainer)
    trainer.run_state.epoch = 0

    def ids(batch, offset):
        torch.manual_seed(offset + 123)  # the global generator must not matter
        roots = rollouts.trees(trainer, batch, 3, params, offset=offset)
        return [root.samples[0].completion_ids for root in roots]

    both = ids(items, 0)
    assert ids(items[1:], 1) == both[1:]
    assert ids(items[:1], 0) == both[:1]
    trainer.run_state.epoch = 1
    assert ids(items, 0) != both  # another epoch samples afresh


def test_accelerate_sharding_requests():
    from comlrl.core.distributed import check_sharding_request, init_context

    launcher = {**FULL, "WORLD_SIZE": "2"}
    # FSDP (version 2) resolves 'auto' to sharded training; plain launches stay DDP
    assert resolve_mode("auto", {**launcher, "ACCELERATE_USE_FSDP": "true"}) == "fsdp"
    assert resolve_mode("auto", {**launcher, "ACCELERATE_USE_FSDP": "false"}) == "ddp"
    assert resolve_mode("ddp", {**launcher, "ACCELERATE_USE_FSDP": "true"}) == "ddp"
    assert resolve_mode("fsdp", launcher) == "fsdp"
    with pytest.raises(ValueError, match="'fsdp' needs WORLD_SIZE >= 2"):
        resolve_mode("fsdp", {**FULL, "WORLD_SIZE": "1"})
    check_sharding_request({"ACCELERATE_USE_DEEPSPEED": "false", "ACCELERATE_USE_FSDP": "no"})
    with pytest.raises(ValueError, match="DeepSpeed.*fsdp2.yaml"):
        init_context("auto", {"ACCELERATE_USE_DEEPSPEED": "true"})
    with pytest.raises(ValueError, match="FSDP version 1.*fsdp_version: 2"):
        check_sharding_request({"ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "1"})
    with pytest.raises(ValueError, match="fsdp_offload_params: false"):
        check_sharding_request({"ACCELERATE_USE_FSDP": "true", "FSDP_OFFLOAD_PARAMS": "true"})
    with pytest.warns(UserWarning, match="fsdp_reshard_after_forward: false"):
        check_sharding_request(
            {"ACCELERATE_USE_FSDP": "true", "FSDP_RESHARD_AFTER_FORWARD": "true"}
        )


def test_fsdp_is_refused_where_agents_cannot_be_sharded(tmp_path, monkeypatch):
    from comlrl.ac import IACConfig, IACTrainer
    from comlrl.core.distributed import DistributedContext as Ctx
    from comlrl.core.testing import tiny_pair
    from comlrl.pbrl import MADPOConfig, MADPOTrainer

    fake = Ctx(rank=0, world_size=2, backend="gloo", sharding="fsdp")
    monkeypatch.setattr("comlrl.core.trainer.init_context", lambda mode: fake)
    m, tok = tiny_pair(seed=0)
    reward = lambda a, b: [0.0] * len(a)  # noqa: E731
    with pytest.raises(ValueError, match="use_separate_critic=False.*distributed_mode='ddp'"):
        IACTrainer(
            agents=[m, tiny_pair(seed=1)[0]],
            tokenizer=tok,
            reward_func=reward,
            args=IACConfig(use_separate_critic=False, output_dir=str(tmp_path)),
        )
    with pytest.raises(ValueError, match="preference trainers do not shard"):
        MADPOTrainer(
            agents=[m, tiny_pair(seed=1)[0]],
            tokenizer=tok,
            reward_func=reward,
            args=MADPOConfig(output_dir=str(tmp_path)),
        )


def test_only_families_on_the_shared_loop_accept_several_processes():
    from comlrl.ac import IACTrainer, MAACTrainer
    from comlrl.core.trainer import TrainerBase
    from comlrl.reinforce import MAGRPOTrainer

    assert MAGRPOTrainer.multi_process_ready
    assert IACTrainer.multi_process_ready and MAACTrainer.multi_process_ready

    class OwnLoop(TrainerBase):
        def train(self, *args, **kwargs):
            return None

    assert not OwnLoop.multi_process_ready


def test_mixed_precision_requests_are_not_silently_ignored():
    from comlrl.core.distributed import init_context

    with pytest.warns(UserWarning, match="'bf16'.*set bf16=True in the trainer config"):
        ctx = init_context("auto", {"ACCELERATE_MIXED_PRECISION": "bf16"})
    assert not ctx.is_distributed
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        init_context("auto", {"ACCELERATE_MIXED_PRECISION": "no"})
