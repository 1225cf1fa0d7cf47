"""The knobs a GRPO user reaches for: learning-rate schedules with warmup (stepped with every
optimizer step, exact across a resume), max_steps, gradient checkpointing without per-step
warnings, LoRA through peft_config, and device_map refused with a clear message."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

from comlrl.core.training.schedule import LR_SCHEDULERS
from comlrl.reinforce import MAGRPOConfig
from tests.core.checkpoint.test_checkpoint_helpers import (
    assert_same_state,
    make_trainer,
    metrics,
    reward,
)

pytestmark = pytest.mark.xdist_group("test_training_knobs")

# make_trainer: 6 items, 2 per rollout batch, buffer 2 -> one optimizer step per batch, 3 per epoch
SCHEDULE = dict(lr_scheduler_type="linear", warmup_steps=2, max_steps=7, agent_learning_rate=1e-3)


def _lrs(trainer) -> list[float]:
    return [opt.param_groups[0]["lr"] for opt in trainer.optimizers]


def test_scheduler_names_are_transformers_names():
    from transformers import SchedulerType

    assert set(LR_SCHEDULERS) <= {s.value for s in SchedulerType}


def test_linear_warmup_schedule_steps_with_each_optimizer_step(tmp_path):
    seen = []

    def watching_reward(c1, c2):
        if len(c1) == 4:  # a training batch: the rate the coming update will use
            seen.append(_lrs(trainer)[0])
        return reward(c1, c2)

    trainer = make_trainer(tmp_path, 1, reward_func=watching_reward, **SCHEDULE)
    trainer.train()
    # max_steps=7 runs past num_train_epochs=1 (3 steps an epoch) and stops at step 7
    assert trainer.run_state.optimizer_steps() == 7
    assert trainer.run_state.agent_steps == {0: 7, 1: 7}
    # the rate after each of steps 1..6: warmup to 1e-3 over 2 steps, then linear decay to 0
    # at step 7 (the schedule is built at the first step, which runs at rate 0)
    assert seen[1:] == pytest.approx([5e-4, 1e-3, 8e-4, 6e-4, 4e-4, 2e-4])
    assert _lrs(trainer) == pytest.approx([0.0, 0.0])
    assert [s.last_epoch for s in trainer.lr_schedules.of(trainer.optimizers_list())] == [7, 7]


def test_schedule_resumes_bitwise(tmp_path):
    reference = make_trainer(tmp_path / "ref", 1, **SCHEDULE)
    reference.train()

    calls = {"n": 0}

    class Crash(RuntimeError):
        pass

    def crashing_reward(c1, c2):
        if len(c1) == 4:
            calls["n"] += 1
            if calls["n"] == 6:
                raise Crash("worker lost")
        return reward(c1, c2)

    ckpt = tmp_path / "run" / "checkpoints"
    first = make_trainer(tmp_path / "run", 1, reward_func=crashing_reward, **SCHEDULE)
    with pytest.raises(Crash):
        first.train(checkpoint_dir=str(ckpt), checkpoint_every_batches=2)
    second = make_trainer(tmp_path / "run", 1, **SCHEDULE)
    second.train(resume_from_checkpoint="latest", checkpoint_dir=str(ckpt))
    assert_same_state(reference, second)
    assert _lrs(second) == _lrs(reference)
    assert [s.state_dict() for s in second.lr_schedules.of(second.optimizers_list())] == [
        s.state_dict() for s in reference.lr_schedules.of(reference.optimizers_list())
    ]
    assert second.run_state.agent_steps == reference.run_state.agent_steps == {0: 7, 1: 7}
    assert metrics(tmp_path / "run") == metrics(tmp_path / "ref")


def test_max_steps_stops_inside_an_epoch(tmp_path):
    trainer = make_trainer(tmp_path, 4, max_steps=2)
    trainer.train()
    assert trainer.run_state.optimizer_steps() == 2
    assert trainer.env_step < 3 * 4  # far fewer than 4 epochs of joint actions
    default = make_trainer(tmp_path / "plain", 1)
    default.train()
    assert (
        default.run_state.optimizer_steps() == 3
        and default.lr_schedules.of(default.optimizers_list()) == []
    )


def test_schedule_settings_are_checked():
    with pytest.raises(ValueError, match="lr_scheduler_type='cosine'.*needs max_steps"):
        MAGRPOConfig(lr_scheduler_type="cosine")
    with pytest.raises(ValueError, match="warmup_ratio is a fraction of max_steps"):
        MAGRPOConfig(lr_scheduler_type="constant_with_warmup", warmup_ratio=0.1)
    with pytest.raises(ValueError, match="'constant' has no warmup"):
        MAGRPOConfig(warmup_steps=3)
    with pytest.raises(ValueError, match="lr_scheduler_type"):
        MAGRPOConfig(lr_scheduler_type="reduce_lr_on_plateau")
    with pytest.raises(ValueError, match="max_steps"):
        MAGRPOConfig(max_steps=0)
    ratio = MAGRPOConfig(lr_scheduler_type="cosine", warmup_ratio=0.25, max_steps=8)
    from comlrl.core.training.schedule import warmup_steps

    assert warmup_steps(ratio) == 2


def test_gradient_checkpointing_trains_without_warnings(tmp_path):
    records = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Collect(level=logging.WARNING)
    hf_logger = logging.getLogger("transformers")
    hf_logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer = make_trainer(tmp_path, 1, gradient_checkpointing=True)
            before = [p.detach().clone() for p in trainer.agents[0].parameters()]
            trainer.train()
    finally:
        hf_logger.removeHandler(handler)
    assert all(m.is_activation_checkpointing for m in trainer.agents)
    assert all(m.config.use_cache is False for m in trainer.agents)
    noisy = [str(w.message) for w in caught] + records
    assert not [m for m in noisy if "checkpoint" in m.lower() or "use_cache" in m], noisy
    after = list(trainer.agents[0].parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after))


def test_peft_config_mapping_trains_only_the_adapters(tmp_path):
    lora = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    trainer = make_trainer(tmp_path, 1, peft_config=lora)
    assert trainer.args.peft_config["peft_type"] == "LORA"
    model = trainer.agents[0]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.train()
    changed = {n for n, p in model.named_parameters() if not torch.equal(before[n], p)}
    assert changed and all("lora_" in n for n in changed)
    trainer.save_model(str(tmp_path / "agents"))
    assert (tmp_path / "agents" / "agent_0" / "adapter_config.json").is_file()


def test_peft_config_object_is_stored_as_plain_data():
    import peft  # a dev dependency; the extra is optional for users

    config = MAGRPOConfig(peft_config=peft.LoraConfig(r=2, target_modules={"v_proj", "q_proj"}))
    assert config.peft_config["target_modules"] == ["q_proj", "v_proj"]
    assert config.peft_config["task_type"] == "CAUSAL_LM"
    with pytest.raises(ValueError, match="peft_config: peft cannot build a config"):
        MAGRPOConfig(peft_config={"r": 2, "not_a_lora_field": 1})
    with pytest.raises(ValueError, match="peft_config must be a mapping"):
        MAGRPOConfig(peft_config="lora")


def test_missing_peft_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name, *a)
    )
    with pytest.raises(ValueError, match=r"comlrl-core\[peft\]"):
        MAGRPOConfig(peft_config={"r": 2})


@pytest.mark.parametrize(
    "model_config, field",
    [
        ({"model_kwargs": {"device_map": "auto"}}, "model_kwargs.device_map"),
        ({"device_map": {"": 0}}, "model_config.device_map"),
    ],
)
def test_device_map_is_refused_before_loading(tmp_path, model_config, field):
    from comlrl.core.testing import tiny_model_dir
    from comlrl.reinforce import MAGRPOTrainer

    with pytest.raises(ValueError, match=f"{field} is not supported.*agent_devices.*torchrun"):
        MAGRPOTrainer(
            agents=[tiny_model_dir()] * 2,
            model_config=model_config,
            train_dataset=[{"prompt": "x"}],
            reward_func=reward,
            args=MAGRPOConfig(output_dir=str(tmp_path)),
        )


def test_run_file_sets_the_knobs(tmp_path):
    import json

    from comlrl.core.commands.launch import DEFAULT_RUN, run_training

    run = {k: (dict(v) if isinstance(v, dict) else v) for k, v in DEFAULT_RUN.items()}
    run["dataset"] = dict(run["dataset"], train_limit=4, eval_limit=1)
    run["output"] = dict(run["output"], base_dir=str(tmp_path), run_name="knobs", verbose=False)
    run["magrpo"] = dict(
        run["magrpo"],
        max_new_tokens=4,
        num_generations=2,
        rollout_buffer_size=2,
        eval_num_samples=0,
        gradient_checkpointing=True,
        lr_scheduler_type="linear",
        warmup_ratio=0.5,
        max_steps=2,
        peft_config={"r": 2, "target_modules": ["q_proj", "v_proj"]},
    )
    run_dir = run_training(run)
    # LoRA from the YAML mapping: the saved agents are adapters
    adapter = json.loads(open(f"{run_dir}/agents/agent_0/adapter_config.json").read())
    assert adapter["r"] == 2 and sorted(adapter["target_modules"]) == ["q_proj", "v_proj"]
    # max_steps=2 ended the run after 2 of the 6 epochs' updates (one per batch of 2 items)
    records = [json.loads(line) for line in open(f"{run_dir}/metrics.jsonl")]
    # (a batch is 2 items x 2 samples = 4 joint actions; 6 full epochs would reach step 48)
    assert 0 < max(r["step"] for r in records) <= 2 * 4
