"""Build the run file (the dict ``comlrl train`` reads) of one catalogued run on one task."""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator
from typing import Any

from benchmarks.learning.catalogue import ALL_TASKS, CREDIT_TASK, DEFAULTS, RunSpec

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples")
# Algorithms whose section starts from the MAGRPO demo's (same fields, another baseline).
MAGRPO_STYLE = ("magrpo", "mareinforce", "marloo", "maremax")
CRITIC_ALGORITHMS = ("iac", "maac")

# The code task: the built-in sample problems of `coding` (no download), a tight sandbox, and
# a small budget (each reward runs tests in a subprocess).
CODE_TASK = {
    "name": "coding",
    "options": {"sandbox": {"wall_seconds": 10, "test_timeout": 2, "cpu_seconds": 5}},
}
CODE_DATASET = {"train_limit": 4, "eval_limit": 2}
CODE_BUDGET = {"num_train_epochs": 2, "num_iterations": 2, "eval_num_samples": 2}


def both_answered(completions1, completions2) -> list[float]:
    """1.0 when both agents wrote a non-blank answer: a second, format-style reward."""
    return [float(bool(a.strip()) and bool(b.strip())) for a, b in zip(completions1, completions2)]


EXTRA_REWARDS = {"both_answered": both_answered}


def example_section(spec: RunSpec) -> tuple[dict[str, Any], str]:
    """The section a run uses and where it came from.

    With ``spec.example``, the example file's section is used when that file is the
    length-ratio demo (task length_ratio, the tiny agents): others tune those files, so they
    are read at run time. Otherwise the catalogue's section is the fallback.
    """
    if spec.example:
        from comlrl.core.config.yaml_io import load_yaml

        path = os.path.join(EXAMPLES, spec.example)
        if os.path.isfile(path):
            data = load_yaml(path) or {}
            task = data.get("task")
            task_name = task.get("name") if isinstance(task, dict) else task
            model = data.get("agent_model") or {}
            model_name = model.get("name") if isinstance(model, dict) else model
            section = data.get(spec.algorithm)
            if task_name == "length_ratio" and model_name == "tiny" and isinstance(section, dict):
                return dict(section), f"examples/{spec.example}"
    return dict(spec.section), "catalogue"


def defaults_section(algorithm: str) -> dict[str, Any]:
    """The section of a defaults row: the demo's MAGRPO section, keeping only the fields
    ``algorithm``'s config carries over, as ``comlrl train --algo`` moves it
    (:func:`comlrl.core.commands.launch.carried_fields`): an iterative trainer keeps its own epochs
    per iteration, because the demo's 6 epochs are its whole budget, which the iterative trainers'
    default 6 iterations already spend (6 epochs in every iteration would be 36 passes, and
    MADPOIter overshoots the length ratio: docs/learning.md measures it).
    """
    from comlrl.core.commands.launch import DEFAULT_RUN, carried_fields
    from comlrl.core.plugins import load_algorithm

    names = carried_fields(load_algorithm(algorithm).default_config_cls)
    return {k: v for k, v in DEFAULT_RUN["magrpo"].items() if k in names}


def run_file(spec: RunSpec, task: str, seed: int) -> tuple[dict[str, Any], str]:
    """The run dict of ``spec`` on ``task`` with ``seed``, and where its settings came from."""
    from comlrl.core.commands.launch import DEFAULT_RUN

    if task not in ALL_TASKS:
        raise ValueError(f"task must be one of {', '.join(ALL_TASKS)}; got {task!r}.")
    run = copy.deepcopy(DEFAULT_RUN)
    run["algorithm"] = spec.algorithm
    run["seed"] = seed
    run["output"].update(verbose=False, save_final_model=False)
    run["checkpoint"]["enabled"] = False
    if spec.kind == DEFAULTS:
        section, source = {**defaults_section(spec.algorithm), **spec.section}, "defaults"
    elif spec.algorithm in MAGRPO_STYLE:
        section, source = {**DEFAULT_RUN["magrpo"], **spec.section}, "demo"
    else:
        section, source = example_section(spec)
    if spec.algorithm != "magrpo":
        run.pop("magrpo", None)
    if spec.algorithm in CRITIC_ALGORITHMS:
        run["critic_model"] = {"name": "tiny"}
    if task == "coding":
        run["task"] = copy.deepcopy(CODE_TASK)
        run["dataset"].update(CODE_DATASET)
        section = _code_budget(spec.algorithm, section)
    if task == CREDIT_TASK:
        # the demo's data counts and budget, on the credit task's prompts
        run["task"] = {"name": CREDIT_TASK, "options": {}}
    run[spec.algorithm] = section
    run["agent_model"].update(spec.agent_model)
    return run, source


def _code_budget(algorithm: str, section: dict[str, Any]) -> dict[str, Any]:
    """Shrink a section to the code task's budget (only the fields it already sets)."""
    out = dict(section)
    for name, value in CODE_BUDGET.items():
        if name in out:
            out[name] = min(out[name], value)
    return out


@contextlib.contextmanager
def extra_rewards(spec: RunSpec) -> Iterator[None]:
    """While active, ``build_trainer`` gives the trainer the task's reward followed by the
    run's extra reward functions (a list, weighted by ``reward_weights``).

    The run-file schema has no way to name several reward functions, so the task's bundle is
    extended here instead of adding one to the library for a benchmark row.
    """
    if not spec.extra_rewards:
        yield
        return
    from unittest import mock

    from comlrl.core.commands import launch

    extras = [EXTRA_REWARDS[name] for name in spec.extra_rewards]
    real_load = launch.load_task

    class WithExtras:
        def __init__(self, task):
            self._task = task

        def __getattr__(self, name):
            return getattr(self._task, name)

        def build(self, task_spec):
            import dataclasses

            bundle = self._task.build(task_spec)
            return dataclasses.replace(bundle, reward_func=[bundle.reward_func, *extras])

    with mock.patch.object(launch, "load_task", lambda name: WithExtras(real_load(name))):
        yield
