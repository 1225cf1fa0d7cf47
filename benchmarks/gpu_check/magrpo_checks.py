"""The MAGRPO device checks: agent placement in ``mp`` mode, activation checkpointing, and a
checkpoint saved and resumed on the device (see :mod:`benchmarks.gpu_check.paths`)."""

from __future__ import annotations

import gc
import os
import tempfile
import traceback

import torch

from benchmarks.gpu_check.paths import (
    CHECK_LR,
    changed_fraction,
    config_has,
    emit_check,
    expected_device,
    family_spec,
    logged_losses,
    memory,
    snapshot,
    training_problems,
    weights_report,
)
from benchmarks.portable import tasks
from benchmarks.portable.sources import agent_dirs, load_kwargs, trainer_sources


def build(spec: dict, run_dir: str, epochs: int, agents=None, **config):
    """A MAGRPO trainer at the check's shape; ``config`` overrides config fields and ``agents``
    (built models) replaces the spec's agent directories."""
    from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

    s = family_spec(spec, "magrpo")
    fields = dict(
        num_train_epochs=epochs,
        agent_learning_rate=CHECK_LR,
        logging_steps=1,
        num_agents=s["num_agents"],
        num_generations=s["num_generations"],
        max_new_tokens=s["max_new_tokens"],
        temperature=s["temperature"],
        top_p=s["top_p"],
        top_k=s["top_k"],
        num_turns=1,
        eval_interval=0,
        rollout_buffer_size=s["rollout_buffer_size"],
        rollout_batch_size=s["num_items"],
        logprob_max_tokens=s["logprob_max_tokens"],
        agent_devices=spec["device"],
        seed=spec["seed"],
        output_dir=run_dir,
    )
    fields.update(config)
    sources = trainer_sources(s)
    if agents is not None:
        sources.update(agents=agents)
        sources.pop("agent_model", None)
    trainer = MAGRPOTrainer(
        **sources,
        num_agents=s["num_agents"],
        train_dataset=tasks.dataset(s["num_items"]),
        reward_func=tasks.length_ratio_reward,
        formatters=tasks.story_prompt,
        args=MAGRPOConfig(**fields),
    )
    trainer.verbose = False
    return trainer


def _train_and_judge(name: str, spec: dict, devices: list[torch.device], **kwargs) -> None:
    """Build, train one epoch, and report the usual training problems plus ``extra`` ones."""
    extra_check = kwargs.pop("extra_check", None)
    with tempfile.TemporaryDirectory(prefix="comlrl-gpu-check-") as run_dir:
        trainer = build(spec, run_dir, 1, **kwargs)
        before = snapshot(trainer)
        trainer.train()
        problems = training_problems(
            logged_losses(run_dir),
            weights_report(trainer, getattr(torch, spec["dtype"]), devices),
        )
        fraction = changed_fraction(before, trainer)
        if fraction == 0.0:
            problems.append("training changed no weight")
        detail = {"weights_changed_fraction": fraction, **memory(spec["device"])}
        if extra_check is not None:
            more, info = extra_check(trainer)
            problems += more
            detail.update(info)
        emit_check(name, "failed" if problems else "passed", "; ".join(problems) or None, **detail)


def check_mp_one_device(spec: dict) -> None:
    """``parallel_training="mp"`` with both agents on the run's device."""
    dev = spec["device"]
    _train_and_judge(
        "mp_one_device",
        spec,
        [expected_device(dev)] * 2,
        parallel_training="mp",
        agent_devices=[dev, dev],
    )


def check_mp_two_devices(spec: dict) -> None:
    """``parallel_training="mp"`` with one agent per GPU, when there are two."""
    if not spec["device"].startswith("cuda"):
        emit_check("mp_two_devices", "not_applicable", "a CPU run: this check needs two GPUs")
        return
    if torch.cuda.device_count() < 2:
        emit_check(
            "mp_two_devices",
            "not_applicable",
            f"{torch.cuda.device_count()} GPU visible: this check needs two",
        )
        return
    from comlrl.core.placement.devices import uses_parallel_workers

    def workers(trainer):
        on = uses_parallel_workers(trainer.args.parallel_training, trainer.agent_devices)
        return ([] if on else ["the agents did not get a worker each"]), {"workers": on}

    _train_and_judge(
        "mp_two_devices",
        spec,
        [torch.device("cuda", 0), torch.device("cuda", 1)],
        parallel_training="mp",
        agent_devices=["cuda:0", "cuda:1"],
        extra_check=workers,
    )


def _checkpointing_on(model) -> bool:
    flag = getattr(model, "is_activation_checkpointing", None)
    if flag is None:
        flag = getattr(model, "is_gradient_checkpointing", False)
    return bool(flag)


def check_gradient_checkpointing(spec: dict) -> None:
    """MAGRPO with activation checkpointing on every agent."""
    from transformers import AutoModelForCausalLM

    from comlrl.reinforce import MAGRPOConfig

    how = "config: gradient_checkpointing=True"
    kwargs: dict = {}
    if config_has(MAGRPOConfig, "gradient_checkpointing"):
        kwargs["gradient_checkpointing"] = True
    else:
        # no config knob: turn it on the models themselves (transformers v5 renamed the method)
        models = []
        for d in agent_dirs(family_spec(spec, "magrpo")):
            m = AutoModelForCausalLM.from_pretrained(d, **load_kwargs(spec))
            enable = getattr(m, "activation_checkpointing_enable", None)
            enable = enable or m.gradient_checkpointing_enable
            enable()
            models.append(m)
        kwargs["agents"] = models
        how = f"no config knob; {enable.__name__}() on each agent before training"

    def still_on(trainer):
        off = [i for i, m in enumerate(trainer.agents) if not _checkpointing_on(m)]
        return ([f"checkpointing is off on agents {off}"] if off else []), {"enabled_by": how}

    _train_and_judge(
        "gradient_checkpointing",
        spec,
        [expected_device(spec["device"])] * 2,
        extra_check=still_on,
        **kwargs,
    )


def _optimizer_states(trainer) -> dict[str, torch.Tensor]:
    """Every optimizer's state tensors, keyed by optimizer, parameter index and name."""
    return {
        f"{o}/{index}/{key}": t
        for o, opt in enumerate(trainer.optimizers_list())
        for index, state in opt.state_dict()["state"].items()
        for key, t in state.items()
        if isinstance(t, torch.Tensor)
    }


def check_checkpoint_resume(spec: dict) -> None:
    """Save after epoch 1; restore exactly (weights, optimizer state, on the device); resume."""
    from comlrl.core.checkpoint.reader import read_checkpoint_metadata

    device = expected_device(spec["device"])
    dtype = getattr(torch, spec["dtype"])
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="comlrl-gpu-resume-") as run_dir:
        ckpt = os.path.join(run_dir, "checkpoints")
        first = build(spec, run_dir, 1)
        first.train(checkpoint_dir=ckpt)
        saved = snapshot(first)
        saved_states = {k: t.to("cpu", copy=True) for k, t in _optimizer_states(first).items()}
        steps = int(first.env_step)
        del first

        # The run is complete at epoch 1, so this trainer only restores.
        restored = build(spec, run_dir, 1)
        restored.train(resume_from_checkpoint="latest", checkpoint_dir=ckpt)
        got = snapshot(restored)
        if any(not torch.equal(saved[k], got[k]) for k in saved):
            problems.append("restored weights differ from the saved ones")
        states = _optimizer_states(restored)
        differ = [
            k
            for k in saved_states
            if k not in states or not torch.equal(saved_states[k], states[k].cpu())
        ]
        if differ or set(states) != set(saved_states):
            problems.append(f"restored optimizer state differs from the saved one: {differ[:5]}")
        # AdamW keeps its step counters on the CPU unless fused or capturable
        off = {str(t.device) for k, t in states.items() if t.dim() > 0 and t.device != device}
        if off:
            problems.append(f"optimizer state off {device}: {sorted(off)}")
        report = weights_report(restored, dtype, [device] * 2)
        problems += [f"after restore: {p}" for p in training_problems(None, report)]
        del restored

        resumed = build(spec, run_dir, 2)
        resumed.train(resume_from_checkpoint="latest", checkpoint_dir=ckpt)
        problems += training_problems(
            logged_losses(run_dir), weights_report(resumed, dtype, [device] * 2)
        )
        if int(resumed.env_step) != 2 * steps:
            problems.append(f"env_step {resumed.env_step} after resuming, expected {2 * steps}")
        meta = read_checkpoint_metadata(ckpt)
        if meta.get("epoch") != 2:
            problems.append(f"the last checkpoint is at epoch {meta.get('epoch')}, expected 2")
    emit_check(
        "checkpoint_resume",
        "failed" if problems else "passed",
        "; ".join(problems) or None,
        optimizer_tensors=len(saved_states),
        **memory(spec["device"]),
    )


CHECKS = {
    "mp_one_device": check_mp_one_device,
    "mp_two_devices": check_mp_two_devices,
    "gradient_checkpointing": check_gradient_checkpointing,
    "checkpoint_resume": check_checkpoint_resume,
}


def run_all(spec: dict) -> None:
    """Every MAGRPO check in turn; one that raises is reported failed with its traceback."""
    for name, check in CHECKS.items():
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        try:
            check(spec)
        except Exception:  # reported as this check's failure, never dropped
            emit_check(name, "failed", traceback.format_exc(limit=12)[-4000:])
