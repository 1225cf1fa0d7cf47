"""The per-rank program of tests/integration/test_distributed_run.py.

``accelerate launch --multi_gpu --num_processes 2 distributed_worker.py OUT`` (on CPUs this runs
torch's elastic launcher with the gloo backend) trains, in one launch (process start-up is the
expensive part): MAGRPO for two epochs, MAGRPO for one epoch and then resumed to two, MAGRPO
with mp placement, IAC for one epoch, MADPO for two epochs, and the CLI's default run. Every rank records a digest of the weights and the
reduced gradients at every optimizer step (through ``gradient_sync_hooks``), its own metrics
before the cross-rank mean, and the digests of its final weights, into ``OUT/rank{r}.json``.
Rank 0 also saves the final weights for the comparison with a single-process run.

The builders below are shared with the test, which runs the same configurations in one process.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import torch

from comlrl.core.testing import tiny_pair

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROMPTS = [
    {"prompt": f"Write a story about {t}."} for t in ("a cat", "the sea", "a robot", "winter")
]


def length_reward(a, b):
    """Depends on the sampled lengths, so advantages are non-zero."""
    return [float(len(y) - len(x)) / 10.0 for x, y in zip(a, b)]


COMMON = dict(
    num_generations=2,
    max_new_tokens=6,
    num_turns=1,
    temperature=1.0,
    top_p=1.0,
    top_k=None,
    agent_learning_rate=1e-4,
    logging_steps=1,
    eval_interval=0,
    seed=0,
    item_seeded_sampling=True,
)


def build_magrpo(output_dir: str, epochs: int, **extra):
    """Two tiny agents; a global rollout buffer of 2 items, so 2 optimizer steps per epoch."""
    from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    args = MAGRPOConfig(
        num_train_epochs=epochs, rollout_buffer_size=2, output_dir=output_dir, **COMMON, **extra
    )
    return MAGRPOTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS,
        reward_func=length_reward,
        args=args,
    )


def build_iac(output_dir: str, epochs: int = 1):
    """IAC with separate critics; a global buffer of 4 samples (2 items x 2 generations),
    one actor step per buffer. Buffer-level advantage normalization pools its statistics over
    the ranks, so it matches one process holding the whole buffer."""
    from comlrl.ac import IACConfig, IACTrainer

    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    critics = [tiny_pair(seed=2)[0], tiny_pair(seed=3)[0]]
    args = IACConfig(
        num_train_epochs=epochs,
        rollout_buffer_size=4,
        advantage_normalization=True,
        use_separate_critic=True,
        output_dir=output_dir,
        **COMMON,
    )
    return IACTrainer(
        agents=[m0, m1],
        critics=critics,
        tokenizer=tok,
        train_dataset=PROMPTS,
        reward_func=length_reward,
        args=args,
    )


def build_madpo(output_dir: str, pairs=None):
    """MADPO over the 4 prompts (3 candidates, up to 2 pairs each), 4 pairs per update, with
    reference log-probs; ``pairs`` (records) skips sampling and trains on those pairs."""
    from comlrl.pbrl import MADPOConfig, MADPOTrainer, PreferencePair

    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    args = MADPOConfig(
        num_train_epochs=2,
        preference_num_candidates=3,
        preference_pairs_per_sample=2,
        train_batch_size=4,
        reference_free=False,
        output_dir=output_dir,
        **{
            **{
                k: v
                for k, v in COMMON.items()
                if k not in ("num_generations", "item_seeded_sampling")
            },
            "eval_interval": 2,
            "eval_num_samples": 1,
        },
    )
    trainer = MADPOTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS,
        eval_dataset=PROMPTS[:2],
        reward_func=length_reward,
        args=args,
    )
    if pairs is not None:
        trainer.preference_pairs = [PreferencePair.from_record(r) for r in pairs]
    return trainer


def build_marlhf(output_dir: str):
    """MARLHF over the 4 prompts: pairs as in MADPO, a reward model trained on them in batches
    of 3 pairs (uneven rank shares), then one MAGRPO epoch on the reward model's scores."""
    from comlrl.pbrl import MARLHFConfig, MARLHFTrainer

    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    args = MARLHFConfig(
        num_train_epochs=1,
        preference_num_candidates=3,
        preference_pairs_per_sample=2,
        rollout_buffer_size=2,
        reward_num_train_epochs=2,
        reward_train_batch_size=3,
        reward_learning_rate=1e-3,
        reward_heldout_fraction=0.0,  # every pair trains, so the step count follows the pairs
        output_dir=output_dir,
        **{k: v for k, v in COMMON.items() if k != "item_seeded_sampling"},
    )
    return MARLHFTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS,
        reward_func=length_reward,
        args=args,
    )


def build_madpo_iter(output_dir: str):
    """Two MADPOIter iterations against the previous iteration's snapshot ("history"), with a
    replay sample over every iteration's shard, reference log-probs and the drift logger."""
    from comlrl.core.rewards.ranges import set_reward_range
    from comlrl.pbrl import MADPOIterConfig, MADPOIterTrainer

    def reward(a, b):
        return length_reward(a, b)

    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    args = MADPOIterConfig(
        num_iterations=2,
        num_train_epochs=1,
        preference_num_candidates=3,
        comparator_num_candidates=3,
        preference_pairs_per_sample=2,
        train_batch_size=2,
        comparator_policy="history",
        preference_replay_mode="all_history",
        preference_replay_sample_size=4,
        log_reward_distribution=True,
        reference_free=False,
        output_dir=output_dir,
        **{k: v for k, v in COMMON.items() if k not in ("num_generations", "item_seeded_sampling")},
    )
    return MADPOIterTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS,
        reward_func=set_reward_range(reward, -10.0, 10.0),
        args=args,
    )


def build_marlhf_iter(output_dir: str):
    """Two MARLHFIter iterations against the current policy: the reward model refits on each
    iteration's pairs (data-parallel), then one MAGRPO epoch per iteration."""
    from comlrl.pbrl import MARLHFIterConfig, MARLHFIterTrainer

    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    args = MARLHFIterConfig(
        num_iterations=2,
        num_train_epochs=1,
        preference_num_candidates=3,
        comparator_num_candidates=3,
        preference_pairs_per_sample=2,
        rollout_buffer_size=2,
        reward_num_train_epochs=1,
        reward_train_batch_size=3,
        reward_learning_rate=1e-3,
        output_dir=output_dir,
        **{k: v for k, v in COMMON.items() if k != "item_seeded_sampling"},
    )
    return MARLHFIterTrainer(
        agents=[m0, m1], tokenizer=tok, train_dataset=PROMPTS, reward_func=length_reward, args=args
    )


def digest(tensors) -> str:
    """SHA-256 over the bytes of ``tensors``, in order."""
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def step_recorder(log: list[str]):
    """A gradient-sync hook: the digest of the weights and reduced gradients before each step."""

    def hook(params):
        log.append(digest([p for p in params] + [p.grad for p in params if p.grad is not None]))

    return hook


def instrument(trainer) -> dict:
    """Record step digests and this rank's metrics before the cross-rank mean."""
    record: dict = {"steps": [], "local_metrics": []}
    trainer.sync.hooks.append(step_recorder(record["steps"]))
    reduce = trainer.reporting.reduced

    def recording_reduce(metrics):
        record["local_metrics"].append(dict(metrics))
        return reduce(metrics)

    trainer.reporting.reduced = recording_reduce
    return record


def final_state(trainer, models) -> dict[str, torch.Tensor]:
    """Every trainable model's tensors under ``name.tensor`` keys."""
    return {
        f"{name}.{key}": value.detach().cpu().clone()
        for name, model in models.items()
        for key, value in model.state_dict().items()
    }


def full_digest_recorder(log: list[str]):
    """Like :func:`step_recorder` for sharded agents: digests of the gathered tensors (every
    rank runs the hook at the same step, so the gathers line up)."""
    from comlrl.core.distributed.sharding import full_tensor

    def hook(params):
        tensors = [full_tensor(p.detach()) for p in params]
        grads = [full_tensor(p.grad) for p in params if p.grad is not None]
        log.append(digest(tensors + grads))

    return hook


def full_state(trainer) -> dict[str, torch.Tensor]:
    """:func:`final_state` with sharded agents gathered (collective)."""
    from comlrl.core.distributed.sharding import full_state_dict

    return {
        f"{name}.{key}": value.detach().cpu().clone()
        for name, model in trainer.trainable_models().items()
        for key, value in full_state_dict(model.state_dict(), model).items()
    }


def main_fsdp(out: str) -> None:
    """The FSDP2 launch (examples/accelerate/fsdp2.yaml): the trainers pick sharding up from the
    launcher's environment (distributed_mode 'auto')."""
    rank = int(os.environ["RANK"])
    result: dict = {}
    trainer = build_magrpo(os.path.join(out, "magrpo"), epochs=2)
    record = {"steps": [], "sharded": trainer.sync.sharded is not None}
    trainer.sync.hooks.append(full_digest_recorder(record["steps"]))
    trainer.train(checkpoint_dir=os.path.join(out, "magrpo_ckpt"))
    state = full_state(trainer)
    record["final"] = digest(state.values())
    shard = next(p for p in trainer.agents[0].parameters() if p.dim() == 2)
    record["local_rows"] = shard.to_local().shape[0]
    record["global_rows"] = shard.shape[0]
    record["optimizer_state_sharded"] = all(
        v.to_local().shape[0] < v.shape[0]
        for st in trainer.optimizers[0].state.values()
        for v in st.values()
        if hasattr(v, "to_local") and v.dim() == 2 and v.shape[0] > 1
    )
    trainer.save_model(os.path.join(out, "magrpo_saved"))
    result["magrpo"] = record
    if rank == 0:
        torch.save(state, os.path.join(out, "magrpo_final.pt"))

    trainer = build_magrpo(os.path.join(out, "magrpo_resumed"), epochs=2)
    trainer.train(
        resume_from_checkpoint=os.path.join(out, "magrpo_ckpt", "checkpoint-1"),
        checkpoint_dir=os.path.join(out, "magrpo_resumed_ckpt"),
    )
    result["resumed"] = {"final": digest(full_state(trainer).values())}

    trainer = build_iac(os.path.join(out, "iac"))
    record = {"steps": [], "sharded": trainer.sync.sharded is not None}
    trainer.sync.hooks.append(full_digest_recorder(record["steps"]))
    trainer.train()
    state = full_state(trainer)
    record["final"] = digest(state.values())
    result["iac"] = record
    if rank == 0:
        torch.save(state, os.path.join(out, "iac_final.pt"))
    with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
        json.dump(result, fh)


def main(out: str) -> None:
    rank = int(os.environ["RANK"])
    result: dict = {}

    trainer = build_magrpo(os.path.join(out, "magrpo_full"), epochs=2)
    record = instrument(trainer)
    trainer.train(checkpoint_dir=os.path.join(out, "magrpo_full_ckpt"))
    record["final"] = digest(p for m in trainer.agents for p in m.state_dict().values())
    record["world_size"] = trainer.dist.world_size
    result["magrpo"] = record
    state = final_state(trainer, trainer.trainable_models())
    if rank == 0:
        torch.save(state, os.path.join(out, "magrpo_final.pt"))

    part_dir, part_ckpt = os.path.join(out, "magrpo_part"), os.path.join(out, "magrpo_part_ckpt")
    build_magrpo(part_dir, epochs=1).train(checkpoint_dir=part_ckpt)
    trainer = build_magrpo(part_dir, epochs=2)
    record = instrument(trainer)
    trainer.train(resume_from_checkpoint="latest", checkpoint_dir=part_ckpt)
    record["final"] = digest(p for m in trainer.agents for p in m.state_dict().values())
    result["resumed"] = record

    # mp placement inside each rank: two "devices" ("cpu" and "cpu:0" are distinct names), so
    # each agent runs on its own persistent worker and reduces through its own process group.
    trainer = build_magrpo(
        os.path.join(out, "magrpo_mp"),
        epochs=2,
        parallel_training="mp",
        agent_devices=["cpu", "cpu:0"],
    )
    record = instrument(trainer)
    trainer.train()
    record["final"] = digest(p for m in trainer.agents for p in m.state_dict().values())
    record["worker_groups"] = len(trainer.sync.worker_groups)
    result["magrpo_mp"] = record

    trainer = build_iac(os.path.join(out, "iac"))
    record = instrument(trainer)
    trainer.train()
    models = trainer.trainable_models()
    record["final"] = digest(p for m in models.values() for p in m.state_dict().values())
    result["iac"] = record
    if rank == 0:
        torch.save(final_state(trainer, models), os.path.join(out, "iac_final.pt"))

    # MADPO: each rank samples and scores its half of the prompts, every rank trains on all
    # the gathered pairs, each update split evenly between the ranks.
    trainer = build_madpo(os.path.join(out, "madpo"))
    record = instrument(trainer)
    trainer.train(checkpoint_dir=os.path.join(out, "madpo_ckpt"))
    record["final"] = digest(p for m in trainer.agents for p in m.state_dict().values())
    record["pairs"] = [p.to_record() for p in trainer.preference_pairs]
    result["madpo"] = record
    if rank == 0:
        torch.save(
            final_state(trainer, trainer.trainable_models()), os.path.join(out, "madpo_final.pt")
        )

    # MARLHF: pairs gathered as in MADPO, the reward model trained data-parallel, then the RL
    # phase on global batches split across the ranks.
    trainer = build_marlhf(os.path.join(out, "marlhf"))
    record = instrument(trainer)
    trainer.rl_trainer.sync.hooks.append(step_recorder(record["steps"]))
    trainer.train()
    record["final"] = digest(
        p for m in trainer.trainable_models().values() for p in m.state_dict().values()
    )
    record["pairs"] = len(trainer.preference_pairs)
    record["env_step"] = trainer.env_step
    result["marlhf"] = record

    # MADPOIter: sharded sampling against a snapshot rank 0 saved, rank 0's replay shards read
    # by both ranks, sharded reference log-probs.
    trainer = build_madpo_iter(os.path.join(out, "madpo_iter"))
    record = instrument(trainer)
    trainer.train()
    record["final"] = digest(p for m in trainer.agents for p in m.state_dict().values())
    record["pairs"] = [p.to_record() for p in trainer.iteration_pairs]
    record["files"] = sorted(
        os.path.relpath(os.path.join(d, f), os.path.join(out, "madpo_iter"))
        for d, _, files in os.walk(os.path.join(out, "madpo_iter"))
        for f in files
    )
    result["madpo_iter"] = record

    trainer = build_marlhf_iter(os.path.join(out, "marlhf_iter"))
    record = instrument(trainer)
    trainer.rl_trainer.sync.hooks.append(step_recorder(record["steps"]))
    trainer.train()
    record["final"] = digest(
        p for m in trainer.trainable_models().values() for p in m.state_dict().values()
    )
    result["marlhf_iter"] = record

    # The CLI under the launcher: one run directory (its default name has a timestamp, so the
    # ranks must agree on it), rank-0-only evaluation, logging and final save.
    from comlrl.core.cli import main as cli_main

    overrides = {
        "output.base_dir": os.path.join(out, "cli"),
        "output.run_name": "null",
        "dataset.train_limit": 4,
        "dataset.eval_limit": 2,
        "magrpo.num_train_epochs": 1,
        "magrpo.max_new_tokens": 6,
        "magrpo.num_generations": 2,
        "magrpo.rollout_buffer_size": 2,
        "magrpo.eval_interval": 2,
        "magrpo.eval_num_samples": 2,
    }
    argv = ["train", "--config", os.path.join(ROOT, "examples", "length_ratio.yaml")]
    for key, value in overrides.items():
        argv += ["--set", f"{key}={value}"]
    assert cli_main(argv) == 0
    result["cli_runs"] = sorted(os.listdir(os.path.join(out, "cli")))

    with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    if sys.argv[2:] == ["fsdp"]:
        main_fsdp(sys.argv[1])
    else:
        main(sys.argv[1])
