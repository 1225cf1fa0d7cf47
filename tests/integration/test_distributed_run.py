"""Two CPU processes (`accelerate launch`, gloo) train MAGRPO, IAC and MADPO data-parallel.

One launch (``distributed_worker.py``) runs everything the 2-process side needs; this module
then checks: ranks hold identical weights before every optimizer step and at the end; the final
weights equal a single-process run over the same global batches (within 1e-5); the JSONL metrics
are the cross-rank mean and only rank 0 wrote logs and checkpoints; a resumed 2-process run ends
where the uninterrupted one did; and resuming with another world size fails clearly.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from comlrl.core.checkpoint import IncompatibleCheckpointError
from comlrl.core.logging.jsonl import read_metrics

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
import distributed_worker as worker  # noqa: E402

pytestmark = pytest.mark.xdist_group("distributed")

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accelerate_launch(out: Path, config: str, *worker_args: str) -> list[dict]:
    """Run the worker under ``accelerate launch --config_file examples/accelerate/<config>``
    (torch's elastic launcher; without GPUs the ranks join a gloo process group)."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env["OMP_NUM_THREADS"] = "1"
    env["CUDA_VISIBLE_DEVICES"] = ""  # two CPU processes even on a GPU machine
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(ROOT / "examples" / "accelerate" / config),
        "--main_process_port",
        str(_free_port()),
        str(HERE / "distributed_worker.py"),
        str(out),
        *worker_args,
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.fixture(scope="module")
def launch(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    return out, _accelerate_launch(out, "cpu_gloo.yaml")


@pytest.fixture(scope="module")
def fsdp_launch(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp")
    return out, _accelerate_launch(out, "fsdp2.yaml", "fsdp")


@pytest.mark.parametrize("run", ["magrpo", "resumed", "iac", "magrpo_mp", "madpo"])
def test_ranks_hold_identical_weights_at_every_step(launch, run):
    _, (r0, r1) = launch
    steps = r0[run]["steps"]
    # 2 agents x 2 steps per epoch (MAGRPO; IAC adds one critic step per actor step); MADPO:
    # 2 agents x 2 epochs x one step per 4 pairs
    expected = {"magrpo": 8, "resumed": 4, "iac": 8, "magrpo_mp": 8}
    expected["madpo"] = 2 * 2 * (len(r0["madpo"]["pairs"]) // 4)
    assert len(steps) == expected[run] > 0
    if run == "magrpo_mp":
        # the agents' workers step concurrently, so their records interleave in any order
        assert sorted(steps) == sorted(r1[run]["steps"])
    else:
        assert steps == r1[run]["steps"]
    assert r0[run]["final"] == r1[run]["final"]
    assert r0["magrpo"]["world_size"] == 2


def _single_process(run: str, tmp_path: Path):
    """The 2-process run ``run`` ("magrpo" or "iac") as one process, not yet trained."""
    if run == "magrpo":
        return worker.build_magrpo(str(tmp_path / "run"), epochs=2)
    return worker.build_iac(str(tmp_path / "run"))


@pytest.mark.parametrize("run", ["magrpo", "iac"])
def test_weights_equal_a_single_process_run(launch, tmp_path, run):
    out, _ = launch
    trainer = _single_process(run, tmp_path)
    assert trainer.dist.world_size == 1
    trainer.train()
    mine = worker.final_state(trainer, trainer.trainable_models())
    theirs = torch.load(out / f"{run}_final.pt", weights_only=True)
    assert set(mine) == set(theirs)
    worst = max((mine[k] - theirs[k]).abs().max().item() for k in mine)
    assert worst <= 1e-5
    # the weights did move, so the comparison means something
    fresh = worker.tiny_pair(seed=0)[0].state_dict()
    assert any(not torch.equal(mine[f"agent_0.{k}"], v) for k, v in fresh.items())
    # same global batches: the reward metrics of both logs agree
    single = read_metrics(tmp_path / "run" / "metrics.jsonl")
    multi = read_metrics(out / ("magrpo_full" if run == "magrpo" else run) / "metrics.jsonl")
    assert [r["step"] for r in single] == [r["step"] for r in multi]
    for a, b in zip(single, multi):
        assert a["turn_1/reward_mean"] == pytest.approx(b["turn_1/reward_mean"], abs=1e-9)


def test_metrics_are_the_cross_rank_mean_and_only_rank_0_writes(launch):
    out, (r0, r1) = launch
    records = read_metrics(out / "magrpo_full" / "metrics.jsonl")
    local0, local1 = r0["magrpo"]["local_metrics"], r1["magrpo"]["local_metrics"]
    assert len(records) == len(local0) == len(local1) == 4
    differs = False
    for rec, a, b in zip(records, local0, local1):
        assert set(rec) - {"step"} == set(a) == set(b)
        for key in a:
            assert rec[key] == pytest.approx((a[key] + b[key]) / 2, rel=1e-12, abs=1e-12)
        differs |= a["turn_1/reward_mean"] != b["turn_1/reward_mean"]
    assert differs, "both ranks saw the same rewards: the shards were not different items"
    # one log per run and one checkpoint set: nothing else was written next to them
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "cli",
            "iac",
            "iac_final.pt",
            "magrpo_final.pt",
            "magrpo_full",
            "magrpo_full_ckpt",
            "magrpo_mp",
            "magrpo_part",
            "magrpo_part_ckpt",
            "madpo",
            "madpo_ckpt",
            "madpo_final.pt",
            "madpo_iter",
            "marlhf",
            "marlhf_iter",
            "rank0.json",
            "rank1.json",
        ]
    )
    # the metrics log and the monitors' summary (rank 0 writes both)
    listing = sorted(p.name for p in (out / "magrpo_full").iterdir())
    assert listing == ["metrics.jsonl", "monitors.json"]
    ckpts = sorted(p.name for p in (out / "magrpo_full_ckpt").iterdir())
    assert ckpts == ["checkpoint-1", "checkpoint-2", "latest"]


def test_resumed_run_equals_the_uninterrupted_run(launch):
    out, (r0, _) = launch
    full, resumed = r0["magrpo"], r0["resumed"]
    assert resumed["final"] == full["final"]
    assert resumed["steps"] == full["steps"][-len(resumed["steps"]) :]
    part = read_metrics(out / "magrpo_part" / "metrics.jsonl")
    whole = read_metrics(out / "magrpo_full" / "metrics.jsonl")
    assert _without_timing(part) == _without_timing(whole)


def _without_timing(records):
    return [
        {k: v for k, v in r.items() if not k.startswith(("timing/", "throughput/"))}
        for r in records
    ]


def test_resume_with_another_world_size_names_both_sizes(launch, tmp_path):
    out, _ = launch
    trainer = worker.build_magrpo(str(tmp_path / "run"), epochs=2)
    with pytest.raises(IncompatibleCheckpointError) as err:
        trainer.train(resume_from_checkpoint=str(out / "magrpo_full_ckpt" / "checkpoint-1"))
    text = str(err.value)
    assert "world_size" in text and "2 process(es)" in text and "has 1" in text


def test_cli_under_the_launcher_writes_one_run(launch):
    out, (r0, r1) = launch
    assert r0["cli_runs"] == r1["cli_runs"] and len(r0["cli_runs"]) == 1
    run = out / "cli" / r0["cli_runs"][0]
    assert (run / "config.yaml").exists()
    assert (run / "agents" / "agent_1" / "config.json").exists()
    records = read_metrics(run / "metrics.jsonl")
    assert any("eval/turn_1/reward_mean" in r for r in records)
    assert any("turn_1/reward_mean" in r for r in records)


def test_mp_placement_inside_each_rank_trains_the_same_agents(launch):
    _, (r0, r1) = launch
    assert r0["magrpo_mp"]["worker_groups"] == 2  # one process group per agent worker
    # concurrent agent workers with the same item-seeded samples: the run without mp, step by
    # step (the two agents' steps interleave in any order)
    assert r0["magrpo_mp"]["final"] == r1["magrpo_mp"]["final"] == r0["magrpo"]["final"]
    assert sorted(r0["magrpo_mp"]["steps"]) == sorted(r0["magrpo"]["steps"])


def test_madpo_ranks_share_the_pairs_of_both_shards_and_match_one_process(launch, tmp_path):
    out, (r0, r1) = launch
    pairs = r0["madpo"]["pairs"]
    assert pairs == r1["madpo"]["pairs"]
    # every prompt was sampled by exactly one rank, and its pairs are in item order
    prompts = [p["prompts"][0] for p in pairs]
    assert sorted(set(prompts), key=prompts.index) == [
        t for t in (worker.PROMPTS[i]["prompt"] for i in range(4)) if t in prompts
    ]
    assert len(set(prompts)) >= 3
    # one process trained on the same pairs (each update not split) ends with the same weights
    trainer = worker.build_madpo(str(tmp_path / "run"), pairs=pairs)
    trainer.train()
    mine = worker.final_state(trainer, trainer.trainable_models())
    theirs = torch.load(out / "madpo_final.pt", weights_only=True)
    assert set(mine) == set(theirs)
    assert max((mine[k] - theirs[k]).abs().max().item() for k in mine) <= 1e-5
    fresh = worker.tiny_pair(seed=0)[0].state_dict()
    assert any(not torch.equal(mine[f"agent_0.{k}"], v) for k, v in fresh.items())
    # rank 0 logged once per update, and checkpointed the run
    records = read_metrics(out / "madpo" / "metrics.jsonl")
    assert sum("dpo/loss" in r for r in records) == len(r0["madpo"]["steps"]) // 2
    assert (out / "madpo_ckpt" / "latest").exists()
    # rank 0 evaluated alone (every second update, and once after the last) while rank 1 went
    # on to the next update
    evals = [r for r in records if "eval/turn_1/reward_mean" in r]
    assert len(evals) == (len(r0["madpo"]["steps"]) // 2 + 1) // 2 + 1


# ---------------------------------------------------------------------- FSDP2 (fsdp2.yaml)
@pytest.mark.parametrize("run", ["magrpo", "iac"])
def test_fsdp_ranks_hold_identical_sharded_agents_at_every_step(fsdp_launch, run):
    _, (r0, r1) = fsdp_launch
    assert r0[run]["sharded"] and r1[run]["sharded"]
    assert len(r0[run]["steps"]) == 8
    assert r0[run]["steps"] == r1[run]["steps"]
    assert r0[run]["final"] == r1[run]["final"]
    # each rank stores half of every weight matrix and of its optimizer state
    assert r0["magrpo"]["local_rows"] * 2 == r0["magrpo"]["global_rows"]
    assert r0["magrpo"]["optimizer_state_sharded"]


@pytest.mark.parametrize("run", ["magrpo", "iac"])
def test_fsdp_weights_equal_a_single_process_run(fsdp_launch, tmp_path, run):
    out, _ = fsdp_launch
    trainer = _single_process(run, tmp_path)
    trainer.train()
    mine = worker.final_state(trainer, trainer.trainable_models())
    theirs = torch.load(out / f"{run}_final.pt", weights_only=True)
    assert set(mine) == set(theirs)
    assert max((mine[k] - theirs[k]).abs().max().item() for k in mine) <= 1e-5


def test_fsdp_checkpoints_resume_exactly_and_saved_agents_load_anywhere(fsdp_launch):
    from transformers import AutoModelForCausalLM

    out, (r0, r1) = fsdp_launch
    assert r0["resumed"]["final"] == r1["resumed"]["final"] == r0["magrpo"]["final"]
    final = torch.load(out / "magrpo_final.pt", weights_only=True)
    saved = AutoModelForCausalLM.from_pretrained(out / "magrpo_saved" / "agent_0")
    for key, value in saved.state_dict().items():
        assert torch.equal(value, final[f"agent_0.{key}"]), key
    ckpts = sorted(p.name for p in (out / "magrpo_ckpt").iterdir())
    assert ckpts == ["checkpoint-1", "checkpoint-2", "latest"]


def test_marlhf_ranks_train_one_reward_model_and_the_same_agents(launch):
    out, (r0, r1) = launch
    steps0, steps1 = r0["marlhf"]["steps"], r1["marlhf"]["steps"]
    # reward model: 2 epochs x ceil(pairs / 3) steps; RL: 2 agents x 2 global batches
    rm_steps = 2 * -(-r0["marlhf"]["pairs"] // 3)
    assert r0["marlhf"]["pairs"] >= 3 and len(steps0) == rm_steps + 4
    assert steps0 == steps1 and r0["marlhf"]["final"] == r1["marlhf"]["final"]
    assert r0["marlhf"]["env_step"] == r1["marlhf"]["env_step"] > 0
    records = read_metrics(out / "marlhf" / "metrics.jsonl")
    assert [r["reward_model/epoch"] for r in records if "reward_model/epoch" in r] == [1.0, 2.0]
    assert any("turn_1/reward_mean" in r for r in records)
    listing = sorted(p.name for p in (out / "marlhf").iterdir())
    assert listing == ["metrics.jsonl", "monitors.json"]


def test_madpo_iter_ranks_select_and_train_on_the_same_pairs(launch):
    out, (r0, r1) = launch
    run0, run1 = r0["madpo_iter"], r1["madpo_iter"]
    assert run0["pairs"] == run1["pairs"] and len(run0["pairs"]) == 4  # the replay sample
    assert all(p["reference_logps"] for p in run0["pairs"])
    assert run0["steps"] == run1["steps"] and len(run0["steps"]) == 2 * 2 * 2
    assert run0["final"] == run1["final"]
    files = run0["files"]
    assert "metrics.jsonl" in files
    # rank 0 alone wrote the snapshots, both replay shards and the drift records
    snapshots = {f.split("/")[1] for f in files if f.startswith("policy_checkpoints/")}
    assert snapshots == {"initial", "iteration_0001", "iteration_0002"}
    assert [f for f in files if f.startswith("preference_replay/")] == [
        "preference_replay/iteration_0001.jsonl",
        "preference_replay/iteration_0002.jsonl",
    ]
    drift = [f for f in files if f.startswith("reward_distributions/")]
    assert len(drift) == 6 and all("iteration_000" in f for f in drift)  # json, svg, png
    assert sorted({f.rsplit(".", 1)[1] for f in drift}) == ["json", "png", "svg"]
    assert not any("tmp" in f or "staging" in f for f in files)
    records = read_metrics(out / "madpo_iter" / "metrics.jsonl")
    assert [r["iter/current_iteration"] for r in records if "iter/current_iteration" in r] == [
        1.0,
        2.0,
    ]


def test_marlhf_iter_ranks_keep_one_reward_model_and_the_same_agents(launch):
    out, (r0, r1) = launch
    run0, run1 = r0["marlhf_iter"], r1["marlhf_iter"]
    # per iteration: reward-model steps, then 2 agents x 2 global RL batches
    assert len(run0["steps"]) > 2 * 4 and run0["steps"] == run1["steps"]
    assert run0["final"] == run1["final"]
    records = read_metrics(out / "marlhf_iter" / "metrics.jsonl")
    iterations = [r["iter/current_iteration"] for r in records if "iter/current_iteration" in r]
    assert iterations == [1.0, 2.0]
