"""Turn a resolved run file (a dict in the task-repo YAML schema) into a trainer and run it."""

from __future__ import annotations

import dataclasses
import inspect
import os
import time
from typing import TYPE_CHECKING, Any

from comlrl.core.checkpoint.layout import LATEST, MANIFEST, newest_complete, resolve_checkpoint
from comlrl.core.config.run_file import (
    MODEL_CONFIG_KEYS,
    ROLLOUT_KEYS,
    SAMPLING_KEYS,
    check_run_file,
)
from comlrl.core.config.validation import check_int, check_optional_int
from comlrl.core.config.yaml_io import load_yaml
from comlrl.core.logging.sink import require_sink_packages
from comlrl.core.plugins import load_algorithm, load_task
from comlrl.core.rewards import RewardProcessors
from comlrl.core.task import TaskSpec

if TYPE_CHECKING:
    from comlrl.core.config.base import CommonConfig

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
    "output": {
        "base_dir": "runs",
        "run_name": None,
        "save_final_model": True,
        "verbose": True,
        # eval items whose completions are printed as a table after each evaluation (0: off)
        "console_completions": 3,
    },
    "reward_processor": {"enabled": False, "scale_factor": 1.0, "shift": 0.0},
    "wandb": None,
    # Checkpoints of the whole training state (see docs/checkpointing.md). With `enabled`, they
    # go to `dir` (default: <run dir>/checkpoints): after every `interval`-th epoch and the last
    # one, and inside epochs after every `every_batches`-th rollout batch when that is set.
    # `total_limit` keeps the newest n (null: all). `comlrl train --resume [PATH|latest]`
    # continues from the newest one; SIGINT/SIGTERM write one before the process exits.
    "checkpoint": {
        "enabled": True,
        "dir": None,
        "interval": 1,
        "total_limit": 1,
        "every_batches": None,
    },
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
_SAMPLING_KEYS = SAMPLING_KEYS


def carried_fields(config_cls: type[CommonConfig]) -> set[str]:
    """The fields of ``config_cls`` that a section of defaults written for another algorithm
    carries over (``comlrl train --algo``): all it has, except ``num_train_epochs`` where it
    counts epochs per online iteration, since the other algorithm's epochs are a whole run's
    budget (6 demo epochs in each of 6 iterations would be 36 passes)."""
    names = {f.name for f in dataclasses.fields(config_cls)}
    if config_cls.epochs_per_iteration:
        names.discard("num_train_epochs")
    return names


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


def run_tokenizers(sources: list, model_config: dict) -> list | None:
    """One tokenizer per agent, loaded from the agents' model names (checked first)."""
    from comlrl.core.models import check_model_sources, is_model_name, tokenizers

    if not all(is_model_name(s) for s in sources):
        return None  # no model named: the trainer says what is missing
    check_model_sources(sources)
    return tokenizers.resolve_tokenizers(None, sources, model_config)


def _shared_or_list(tokenizers: list | None):
    """One tokenizer object when every agent has the same one (a single-actor trainer such as
    centralized collaboration takes exactly one), else the list."""
    if tokenizers and all(t is tokenizers[0] for t in tokenizers):
        return tokenizers[0]
    return tokenizers


def algorithm_config(run: dict[str, Any], config_cls, algo: str) -> Any:
    """Build the algorithm's config dataclass from its YAML section; a ``preset:`` key builds
    it through ``config_cls.preset`` (the recipe's fields, then the section's on top)."""
    section = dict(run.get(algo) or {})
    preset = section.pop("preset", None)
    agent_section = run.get("agent_model") or {}
    for src, dst in _SAMPLING_KEYS.items():
        if isinstance(agent_section, dict) and agent_section.get(src) is not None:
            section.setdefault(dst, agent_section[src])
    rollout = run.get("rollout") or {}
    for src, dst in ROLLOUT_KEYS.items():
        value = rollout.get(src)
        if value is None:
            continue
        if section.get(dst) is not None and section[dst] != value:
            raise ValueError(
                f"run file: rollout.{src} ({value!r}) and {algo}.{dst} ({section[dst]!r}) "
                "disagree; set one of them."
            )
        section[dst] = value
    monitors = run.get("monitors")
    if monitors is not None:
        if section.get("monitors") is not None and section["monitors"] != monitors:
            raise ValueError(
                f"run file: monitors ({monitors!r}) and {algo}.monitors "
                f"({section['monitors']!r}) disagree; set one of them."
            )
        section["monitors"] = monitors
    names = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(section) - names)
    if unknown:
        raise ValueError(f"{algo}: unknown field(s) {unknown}; valid fields: {sorted(names)}.")
    if run.get("seed") is not None and "seed" in names:
        section.setdefault("seed", run["seed"])
    if preset is not None:
        return config_cls.preset(preset, **section)
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
    check_run_file(run, DEFAULT_RUN)
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
    model_config = (
        {k: v for k, v in agent_section.items() if k in MODEL_CONFIG_KEYS}
        if isinstance(agent_section, dict)
        else {}
    )
    sources = (
        [resolve_model_name(a) for a in agents]
        if agents
        else [resolve_model_name(agent_name)] * num_agents
    )
    # A missing optional package fails here, before a tokenizer or model loads.
    require_sink_packages(getattr(config, "report_to", None), run.get("wandb"))
    # The task's formatters apply each agent's chat template, so they need its tokenizer; the
    # trainer gets the same tokenizer objects.
    tokenizers = run_tokenizers(sources, model_config)
    spec = TaskSpec(
        num_agents=num_agents,
        dataset_name=dataset.get("name"),
        train_split=dataset.get("train_split"),
        eval_split=dataset.get("eval_split"),
        train_limit=dataset.get("train_limit"),
        eval_limit=dataset.get("eval_limit"),
        external_mode=(run.get("external") or {}).get("mode"),
        # One actor writes every role: the roles' prompts are joined into one prompt, which
        # the config's apply_chat_template wraps, so the roles' own prompts stay plain.
        tokenizer=None
        if getattr(config, "collaboration_mode", None) == "centralized"
        else tokenizers,
        options=options,
    )
    bundle = task.build(spec)
    wandb = run.get("wandb")
    if wandb is not None:
        wandb = dict(wandb)
        wandb.setdefault("config_sections", {k: v for k, v in run.items() if isinstance(v, dict)})
    kwargs: dict[str, Any] = dict(
        agent_model=None if agents else sources[0],
        agents=sources if agents else None,
        num_agents=num_agents,
        tokenizer=_shared_or_list(tokenizers),
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


def checkpoint_settings(run: dict[str, Any]) -> dict[str, Any]:
    """The validated ``checkpoint`` section of a run file (before any model is loaded)."""
    section = run.get("checkpoint") or {}
    if not isinstance(section, dict):
        raise ValueError("checkpoint: expected a mapping with enabled/dir/interval/total_limit.")
    known = {"enabled", "dir", "interval", "total_limit", "every_batches"}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ValueError(f"checkpoint: unknown field(s) {unknown}; valid fields: {sorted(known)}.")
    out = {
        "enabled": section.get("enabled", False),
        "dir": section.get("dir"),
        "interval": section.get("interval", 1),
        "total_limit": section.get("total_limit"),
        "every_batches": section.get("every_batches"),
    }
    if not isinstance(out["enabled"], bool):
        raise ValueError(f"checkpoint.enabled must be true or false, got {out['enabled']!r}.")
    if out["dir"] is not None and not isinstance(out["dir"], str):
        raise ValueError(f"checkpoint.dir must be a path or null, got {out['dir']!r}.")
    check_int("checkpoint.interval", out["interval"], 1)
    check_optional_int("checkpoint.total_limit", out["total_limit"], 1)
    check_optional_int("checkpoint.every_batches", out["every_batches"], 1)
    return out


def _has_checkpoint(checkpoint_dir: str) -> bool:
    return newest_complete(checkpoint_dir) is not None


def _checkpoint_time(checkpoint_dir: str) -> float:
    newest = newest_complete(checkpoint_dir)
    if newest is None:
        raise ValueError(f"{checkpoint_dir} holds no complete checkpoint.")
    return os.path.getmtime(os.path.join(newest, MANIFEST))


def _run_checkpoint_dir(run_dir: str, run: dict[str, Any] | None = None) -> str:
    """Where a run keeps its checkpoints: ``checkpoint.dir`` of its run file, else
    ``<run_dir>/checkpoints``."""
    if run is None:
        saved = os.path.join(run_dir, "config.yaml")
        run = load_yaml(saved) if os.path.isfile(saved) else {}
    return (run.get("checkpoint") or {}).get("dir") or os.path.join(run_dir, "checkpoints")


def locate_resume(resume: str, run: dict[str, Any]) -> tuple[str, str]:
    """``(run_dir, checkpoint_path)`` for ``comlrl train --resume``.

    ``resume`` is ``latest`` (the run named by ``output.run_name``, or else the newest run under
    ``output.base_dir`` that has a checkpoint), a run directory, a checkpoint directory (or its
    ``latest`` pointer), or a directory of checkpoints.
    """
    output = run.get("output") or {}
    base = output.get("base_dir") or "runs"
    if resume == LATEST:
        if output.get("run_name"):
            candidates = [os.path.join(base, output["run_name"])]
        else:
            runs = [os.path.join(base, n) for n in os.listdir(base)] if os.path.isdir(base) else []
            candidates = sorted(
                (r for r in runs if _has_checkpoint(_run_checkpoint_dir(r))),
                key=lambda r: _checkpoint_time(_run_checkpoint_dir(r)),
            )[-1:]
        if not candidates or not _has_checkpoint(_run_checkpoint_dir(candidates[0])):
            where = candidates[0] if candidates else base
            raise ValueError(
                f"--resume latest: no checkpoint found under {where}; pass a run or checkpoint "
                "directory instead."
            )
        resume = candidates[0]
    if os.path.isfile(os.path.join(resume, "config.yaml")):
        run_dir = os.path.normpath(resume)
        return run_dir, resolve_checkpoint(_run_checkpoint_dir(run_dir))
    checkpoint = resolve_checkpoint(resume)
    parent = os.path.dirname(os.path.dirname(os.path.abspath(checkpoint)))
    if os.path.isfile(os.path.join(parent, "config.yaml")):
        return parent, checkpoint
    from comlrl.core.checkpoint.reader import read_checkpoint_metadata

    run_dir = read_checkpoint_metadata(checkpoint)["run_dir"]
    if not run_dir:
        raise ValueError(f"--resume {resume}: cannot tell which run directory it belongs to.")
    return run_dir, checkpoint


class RunInterrupted(Exception):
    """SIGINT/SIGTERM stopped training; ``resume`` is the command that continues the run
    (None when checkpoints are disabled and nothing was saved)."""

    def __init__(self, run_dir: str, resume: str | None):
        self.run_dir = run_dir
        self.resume = resume
        if resume:
            text = f"Training stopped by a signal; continue it with: {resume}"
        else:
            text = "Training stopped by a signal; checkpoints are disabled, nothing was saved."
        super().__init__(text)


def run_training(run: dict[str, Any], resume: str | None = None) -> str:
    """Train as ``run`` describes and return the run directory.

    ``resume`` continues a checkpointed run (anything :func:`locate_resume` accepts). Nothing in
    the run directory changes until every check passed (see :mod:`comlrl.core.commands.run_dir`).
    Raises :class:`RunInterrupted` when a signal stopped training.
    """
    from comlrl.core.checkpoint.session import on_checks_passed
    from comlrl.core.commands import run_dir as run_files

    check_run_file(run, DEFAULT_RUN)
    algo = str(run.get("algorithm") or "magrpo").lower()
    task_name, _ = _task_section(run)
    output = run.get("output") or {}
    ckpt = checkpoint_settings(run)
    console = output.get("console_completions", 3)
    check_int("output.console_completions", console, 0)
    from comlrl.core.distributed import barrier, broadcast_object, init_context

    # Under torchrun/accelerate every rank must agree on the run directory (its default name
    # holds a timestamp), and only rank 0 writes it.
    dist = init_context("auto")
    if resume:
        run_dir, checkpoint = locate_resume(resume, run)
    else:
        run_dir = os.path.join(output.get("base_dir") or "runs", run_name(run, algo, task_name))
        checkpoint = None
    run_dir = broadcast_object(run_dir, dist)
    checkpoint_dir = _run_checkpoint_dir(run_dir, run) if ckpt["enabled"] else None
    if checkpoint is None:
        run_files.check_fresh(run_dir, checkpoint_dir)
    created = not os.path.exists(run_dir)
    barrier(dist)  # every rank checked the directory before rank 0 creates anything in it
    committed = []
    trainer = None

    def commit() -> None:
        committed.append(True)
        if dist.is_main:
            run_files.write_config(run_dir, run)

    try:
        trainer = build_trainer(run, run_dir)
        trainer.verbose = bool(output.get("verbose", True))
        trainer.console_completions = console
        with on_checks_passed(commit):
            trainer.train(
                resume_from_checkpoint=checkpoint,
                checkpoint_dir=checkpoint_dir,
                checkpoint_interval=ckpt["interval"],
                checkpoint_total_limit=ckpt["total_limit"],
                checkpoint_every_batches=ckpt["every_batches"],
            )
        if trainer.run_state.interrupted:
            saved = trainer.run_state.last_checkpoint is not None
            raise RunInterrupted(run_dir, run_files.resume_command(run_dir) if saved else None)
        if output.get("save_final_model", True):
            trainer.save_model(os.path.join(run_dir, "agents"))
    except BaseException:
        if created and not committed and dist.is_main:
            run_files.remove_if_unused(run_dir)
        raise
    finally:
        # The command owns its W&B run: finish it here, so a caller that runs the CLI twice in
        # one process (tests, notebooks) does not log into the previous run.
        logger = trainer.reporting.logger if trainer is not None else None
        if logger is not None:
            logger.close()
    return run_dir
