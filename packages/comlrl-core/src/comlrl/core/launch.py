"""Turn a resolved run file (a dict in the task-repo YAML schema) into a trainer and run it."""

from __future__ import annotations

import dataclasses
import inspect
import os
import time
from typing import Any

import yaml
from comlrl.core.registry import load_algorithm, load_task
from comlrl.core.rewards import RewardProcessors
from comlrl.core.task import TaskSpec

DEFAULT_RUN: dict[str, Any] = {
    "algorithm": "magrpo",
    "task": {"name": "length_ratio", "options": {}},
    "agent_model": {"name": "tiny"},
    "agents": None,
    "critic_model": None,
    "critics": None,
    "dataset": {
        "name": None,
        "train_split": None,
        "eval_split": None,
        "train_limit": 16,
        "eval_limit": 4,
    },
    "external": {"mode": None},
    "seed": 0,
    "output": {"base_dir": "runs", "run_name": None, "save_final_model": True, "verbose": True},
    "reward_processor": {"enabled": False, "scale_factor": 1.0, "shift": 0.0},
    "wandb": None,
    "magrpo": {
        "num_train_epochs": 6,
        "num_generations": 4,
        "num_turns": 1,
        "max_new_tokens": 32,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": None,
        "agent_learning_rate": 3.0e-3,
        "rollout_buffer_size": 4,
        "logging_steps": 1,
        "eval_interval": 8,
        "eval_num_samples": 4,
    },
}

# agent_model keys in the task-repo schema that are really sampling settings
_SAMPLING_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "max_length": "max_new_tokens",
}


def _task_section(run: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    task = run.get("task")
    if isinstance(task, str):
        return task, {}
    if isinstance(task, dict) and task.get("name"):
        return str(task["name"]), dict(task.get("options") or {})
    dataset_type = (run.get("dataset") or {}).get("type")
    if dataset_type:
        return str(dataset_type), {}
    raise ValueError("task: name a registered task (see `comlrl list`), e.g. task: length_ratio.")


def resolve_model_name(name: Any) -> Any:
    """``tiny``/``tiny-small`` build the offline test models; anything else is a hub id/dir."""
    if isinstance(name, str) and name in ("tiny", "tiny-small"):
        from comlrl.core.testing import tiny_model_dir

        return tiny_model_dir(size="small" if name == "tiny-small" else "tiny")
    return name


def algorithm_config(run: dict[str, Any], config_cls, algo: str) -> Any:
    """Build the algorithm's config dataclass from its YAML section."""
    section = dict(run.get(algo) or {})
    agent_section = run.get("agent_model") or {}
    for src, dst in _SAMPLING_KEYS.items():
        if isinstance(agent_section, dict) and agent_section.get(src) is not None:
            section.setdefault(dst, agent_section[src])
    names = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(section) - names)
    if unknown:
        raise ValueError(f"{algo}: unknown field(s) {unknown}; valid fields: {sorted(names)}.")
    if run.get("seed") is not None and "seed" in names:
        section.setdefault("seed", run["seed"])
    return config_cls(**section)


def _reward_processor(run: dict[str, Any]):
    section = run.get("reward_processor") or {}
    if not section.get("enabled"):
        return None
    return RewardProcessors.compose(
        RewardProcessors.scale(float(section.get("scale_factor", 1.0))),
        RewardProcessors.shift(float(section.get("shift", 0.0))),
    )


def run_name(run: dict[str, Any], algo: str, task: str) -> str:
    """The run's directory name under ``output.base_dir``."""
    given = (run.get("output") or {}).get("run_name")
    return given or f"{algo}-{task}-{time.strftime('%Y%m%d-%H%M%S')}"


def build_trainer(run: dict[str, Any], run_dir: str):
    """Construct the trainer described by ``run``; cheap validation happens before loading."""
    algo = str(run.get("algorithm") or "magrpo").lower()
    trainer_cls = load_algorithm(algo)
    config = algorithm_config(run, trainer_cls.default_config_cls, algo)
    if hasattr(config, "output_dir"):
        config.output_dir = run_dir
    task_name, options = _task_section(run)
    task = load_task(task_name)
    dataset = run.get("dataset") or {}
    agents = run.get("agents")
    agent_section = run.get("agent_model") or {}
    agent_name = agent_section.get("name") if isinstance(agent_section, dict) else agent_section
    num_agents = len(agents) if agents else getattr(task, "num_agents", 2)
    spec = TaskSpec(
        num_agents=num_agents,
        dataset_name=dataset.get("name"),
        train_split=dataset.get("train_split"),
        eval_split=dataset.get("eval_split"),
        train_limit=dataset.get("train_limit"),
        eval_limit=dataset.get("eval_limit"),
        external_mode=(run.get("external") or {}).get("mode"),
        options=options,
    )
    bundle = task.build(spec)
    model_config = (
        {
            k: v
            for k, v in agent_section.items()
            if k
            in (
                "torch_dtype",
                "dtype",
                "attn_implementation",
                "special_tokens",
                "trust_remote_code",
                "model_kwargs",
            )
        }
        if isinstance(agent_section, dict)
        else {}
    )
    wandb = run.get("wandb")
    if wandb is not None:
        wandb = dict(wandb)
        wandb.setdefault("config_sections", {k: v for k, v in run.items() if isinstance(v, dict)})
    kwargs: dict[str, Any] = dict(
        agent_model=None if agents else resolve_model_name(agent_name),
        agents=[resolve_model_name(a) for a in agents] if agents else None,
        num_agents=num_agents,
        model_config=model_config,
        train_dataset=bundle.train_dataset,
        eval_dataset=bundle.eval_dataset,
        reward_func=bundle.reward_func,
        reward_processor=_reward_processor(run),
        formatters=bundle.formatters,
        external_transition=bundle.external_transition,
        wandb_config=wandb,
        eval_logger=bundle.eval_logger,
        eval_aggregator=bundle.eval_aggregator,
        args=config,
    )
    critic = run.get("critic_model")
    if isinstance(critic, dict) and critic.get("name"):
        kwargs["critic_model"] = resolve_model_name(critic["name"])
    if run.get("critics"):
        kwargs["critics"] = [resolve_model_name(c) for c in run["critics"]]
    accepted = inspect.signature(trainer_cls.__init__).parameters
    missing = [k for k in ("critic_model", "critics") if k in kwargs and k not in accepted]
    if missing:
        raise ValueError(f"{algo} takes no {missing[0]}; remove it from the run file.")
    kwargs = {k: v for k, v in kwargs.items() if k in accepted}
    return trainer_cls(**kwargs)


def run_training(run: dict[str, Any], resume: str | None = None) -> str:
    """Train as ``run`` describes and return the run directory."""
    algo = str(run.get("algorithm") or "magrpo").lower()
    task_name, _ = _task_section(run)
    output = run.get("output") or {}
    run_dir = (
        resume_run_dir(resume)
        if resume
        else os.path.join(output.get("base_dir") or "runs", run_name(run, algo, task_name))
    )
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.yaml"), "w", encoding="utf-8") as fh:
        yaml.safe_dump(_redacted(run), fh, sort_keys=False)
    trainer = build_trainer(run, run_dir)
    trainer.verbose = bool(output.get("verbose", True))
    ckpt = run.get("checkpoint") or {}
    trainer.train(
        resume_from_checkpoint=_resume_path(resume, run_dir) if resume else None,
        checkpoint_dir=ckpt.get("dir")
        or (os.path.join(run_dir, "checkpoints") if ckpt.get("enabled") or resume else None),
        checkpoint_interval=int(ckpt.get("interval", 1)),
        checkpoint_total_limit=ckpt.get("total_limit"),
    )
    if output.get("save_final_model", True):
        trainer.save_model(os.path.join(run_dir, "agents"))
    return run_dir


def resume_run_dir(resume: str) -> str:
    """The run directory that owns a checkpoint path (``<run>/checkpoints/<ckpt>``)."""
    path = os.path.abspath(resume)
    if os.path.basename(path) == "latest" or os.path.isdir(os.path.join(path, "checkpoints")):
        return (
            path
            if os.path.isdir(os.path.join(path, "checkpoints"))
            else os.path.dirname(os.path.dirname(path))
        )
    return os.path.dirname(os.path.dirname(path))


def _resume_path(resume: str, run_dir: str) -> str:
    if os.path.isdir(os.path.join(resume, "checkpoints")):
        return os.path.join(resume, "checkpoints", "latest")
    return resume


def _redacted(run: dict[str, Any]) -> dict[str, Any]:
    """The run file without secrets (API keys stay in the environment)."""
    out = {}
    for key, value in run.items():
        if isinstance(value, dict):
            value = _redacted(value)
        elif "api_key" in key.lower() and not key.lower().endswith("_env"):
            value = "<redacted>"
        out[key] = value
    return out
