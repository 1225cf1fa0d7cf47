"""The schema of a YAML run file, and the check that a run follows it.

Every section but two is a dataclass below: its fields are the valid keys. The algorithm's own
section (``magrpo:``, ``iac:``, ...) takes the fields of that algorithm's config dataclass, and
``task.options`` takes the options the task declares (``option_names``). So a typo such as
``magrop:`` or ``datset:`` is an error with the nearest valid name, never a silent default.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from comlrl.core.monitors.config import MonitorsConfig

# agent_model keys handed to from_pretrained (as ``model_config``)
MODEL_CONFIG_KEYS = (
    "torch_dtype",
    "dtype",
    "attn_implementation",
    "special_tokens",
    "trust_remote_code",
    "model_kwargs",
    "share_parameters",
)
# agent_model keys of the task-repo schema that are sampling settings of the algorithm section
SAMPLING_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "max_length": "max_new_tokens",
}


@dataclass
class TaskSection:
    """``task:`` (or just ``task: NAME``): a registered task and its options."""

    name: str | None = None
    options: dict | None = None


@dataclass
class DatasetSection:
    """``dataset:``: where the task reads its rows (null ``name``: the built-in sample)."""

    name: str | None = None
    type: str | None = None  # task-repo spelling of the task name, used when task is unset
    train_split: str | None = None
    eval_split: str | None = None
    train_limit: int | None = None
    eval_limit: int | None = None


@dataclass
class ModelSection:
    """``critic_model:``: a hub id or directory."""

    name: str | None = None


AgentModelSection = dataclasses.make_dataclass(
    "AgentModelSection",
    [("name", Any, None)] + [(k, Any, None) for k in (*MODEL_CONFIG_KEYS, *SAMPLING_KEYS)],
    namespace={"__doc__": "``agent_model:``: the agents' model, its loading and sampling keys."},
)


@dataclass
class ExternalSection:
    """``external:``: the task's multi-turn transition."""

    mode: str | None = None


@dataclass
class OutputSection:
    """``output:``: the run directory ``base_dir/run_name`` and what goes in it."""

    base_dir: str = "runs"
    run_name: str | None = None
    save_final_model: bool = True
    verbose: bool = True
    console_completions: int = 3


@dataclass
class RolloutSection:
    """``rollout:``: which backend samples the rollouts and its options (the algorithm
    section's ``rollout_backend`` and ``rollout_backend_options``; docs/rollout_backends.md)."""

    backend: str | None = None
    options: dict | None = None


# rollout: keys and the config fields they set
ROLLOUT_KEYS = {"backend": "rollout_backend", "options": "rollout_backend_options"}


@dataclass
class RewardProcessorSection:
    """``reward_processor:``: ``reward * scale_factor + shift`` when enabled."""

    enabled: bool = False
    scale_factor: float = 1.0
    shift: float = 0.0


@dataclass
class CheckpointSection:
    """``checkpoint:`` (see docs/checkpointing.md)."""

    enabled: bool = True
    dir: str | None = None
    interval: int = 1
    total_limit: int | None = 1
    every_batches: int | None = None


@dataclass
class WandbSection:
    """``wandb:`` (null: no W&B); the keys ``logging.wandb_sink`` reads."""

    project: str | None = None
    entity: str | None = None
    name: str | None = None
    run_name: str | None = None
    dir: str | None = None
    tags: list | None = None
    id: str | None = None
    resume: str | None = None
    mode: str | None = None
    group: str | None = None
    notes: str | None = None
    config_sections: dict | None = None


@dataclass
class RunFile:
    """The top level; besides these, one section named after ``algorithm``."""

    algorithm: str = "magrpo"
    task: TaskSection | str | None = None
    # AgentModelSection is built by make_dataclass, a class mypy cannot see.
    agent_model: AgentModelSection | str | None = None  # type: ignore[valid-type]
    agents: list | None = None
    critic_model: ModelSection | None = None
    critics: list | None = None
    dataset: DatasetSection | None = None
    external: ExternalSection | None = None
    seed: int | None = None
    output: OutputSection | None = None
    rollout: RolloutSection | None = None
    reward_processor: RewardProcessorSection | None = None
    wandb: WandbSection | None = None
    checkpoint: CheckpointSection | None = None
    monitors: MonitorsConfig | None = None


SECTIONS: dict[str, type] = {
    "task": TaskSection,
    "agent_model": AgentModelSection,
    "critic_model": ModelSection,
    "dataset": DatasetSection,
    "external": ExternalSection,
    "output": OutputSection,
    "rollout": RolloutSection,
    "reward_processor": RewardProcessorSection,
    "wandb": WandbSection,
    "checkpoint": CheckpointSection,
    # ``monitors:`` sets the algorithm section's ``monitors`` field (docs/monitors.md).
    "monitors": MonitorsConfig,
}

# Task-repo keys that this package reads elsewhere (or not at all): where each one went.
MOVED_KEYS = {
    "agent_model.type": "nothing: the architecture is read from the model's config.json",
    "critic_model.type": "nothing: the architecture is read from the model's config.json",
    "external.original_prompt": "task.options.original_prompt (tasks that offer it)",
    "external.previous_response": "task.options.previous_response (tasks that offer it)",
    "external.sandbox_slice": "task.options.test_slice (coding)",
    "external.external_prompt_passthrough": "the algorithm section's external_prompt_passthrough",
    "output.save_path": "output.base_dir and output.run_name",
}


def field_names(cls: type) -> list[str]:
    """The field names of a dataclass, in order."""
    return [f.name for f in dataclasses.fields(cls)]


def nearest_hint(name: Any, valid: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the valid name nearest to ``name`` (difflib, else one it
    abbreviates), or ``""``."""
    valid = [str(v) for v in valid]
    match = difflib.get_close_matches(str(name), valid, n=1, cutoff=0.6)
    if not match:  # a shortened name ("every" for "every_batches") is close too
        match = [v for v in valid if v.startswith(str(name))][:1] if len(str(name)) >= 3 else []
    return f" (did you mean {match[0]!r}?)" if match else ""


def unknown_key_error(where: str, key: Any, valid: Iterable[str]) -> ValueError:
    """A ValueError for ``key`` under ``where`` with the nearest valid name and the full list."""
    valid = sorted(valid)
    path = f"{where}.{key}" if where else str(key)
    if path in MOVED_KEYS:
        return ValueError(
            f"run file: {path} is not read by comlrl; its setting lives in {MOVED_KEYS[path]}."
        )
    what = f"{where} has no key" if where else "unknown top-level section"
    listing = ", ".join(valid) if valid else "none (this section takes no keys)"
    return ValueError(f"run file: {what} {key!r}{nearest_hint(key, valid)}; valid: {listing}.")


def check_keys(where: str, section: Any, valid: Iterable[str]) -> None:
    """``section`` must be a mapping (or null) whose keys are all in ``valid``."""
    if section is None:
        return
    if not isinstance(section, Mapping):
        raise ValueError(
            f"run file: {where} must be a mapping of keys to values (or null), got "
            f"{type(section).__name__} {section!r}."
        )
    valid = set(valid)
    for key in section:
        if key not in valid:
            raise unknown_key_error(where, key, valid)


def check_run_file(run: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> None:
    """Reject unknown sections, keys and task options in a resolved run (before any model loads).

    ``defaults`` is the run the file was merged over: a leftover default section of another
    algorithm (e.g. ``magrpo`` when ``--set algorithm=iac``) is tolerated there.
    """
    from comlrl.core.plugins import available_algorithms, load_algorithm

    if not isinstance(run, Mapping):
        raise ValueError(f"run file: the top level must be a mapping, got {type(run).__name__}.")
    algo = str(run.get("algorithm") or "magrpo").strip().lower()
    config_cls = load_algorithm(algo).default_config_cls
    installed = set(available_algorithms())
    for key in run:
        if key in SECTIONS or key in field_names(RunFile) or key == algo:
            continue
        if key in installed:
            if defaults is not None and run[key] == defaults.get(key):
                continue
            raise ValueError(
                f"run file: section {key!r} configures algorithm {key!r}, but algorithm is "
                f"{algo!r}; rename the section to {algo!r} or set algorithm: {key}."
            )
        raise unknown_key_error("", key, [*field_names(RunFile), algo])
    for name, cls in SECTIONS.items():
        section = run.get(name)
        if name in ("task", "agent_model") and isinstance(section, str):
            continue
        check_keys(name, section, field_names(cls))
    # `preset:` names one of the config class's recipes (`Config.preset`), when it has any.
    preset_key = {"preset"} if config_cls.presets else set()
    check_keys(algo, run.get(algo), [*field_names(config_cls), *preset_key])
    for name in ("agents", "critics"):
        value = run.get(name)
        if value is not None and not isinstance(value, list):
            raise ValueError(f"run file: {name} must be a list of model ids or dirs, or null.")
    _check_task_options(run)


def _check_task_options(run: Mapping[str, Any]) -> None:
    from comlrl.core.plugins import load_task

    task = run.get("task")
    if not isinstance(task, Mapping) or not task.get("name"):
        return
    options = task.get("options")
    if not options:
        return
    declared = getattr(load_task(str(task["name"])), "option_names", None)
    if declared is None:
        return  # a task that declares nothing validates its own options in build()
    check_keys(f"task.options of task {task['name']!r}", options, declared)
