"""``comlrl eval``: evaluate saved agents on a task's eval split, greedy and sampled.

The agents come from a run directory (its ``agents/agent_<i>`` dirs, written at the end of
``comlrl train``; the task, dataset and sampling settings come from its ``config.yaml``) or
from explicit agent directories (the settings then come from ``--config``/``--task``/``--set``,
over the ``comlrl train`` defaults). The result is printed as a table and written as JSON.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Sequence
from typing import Any

from comlrl.core.config.yaml_io import load_yaml

EVAL_FILE = "eval.json"
_RUN_FILE = "config.yaml"
_MODEL_FILE = "config.json"


def _is_run_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, _RUN_FILE))


def _check_agent_dir(path: str, argument: str) -> str:
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"comlrl eval {argument}: {path} does not exist; expected a run directory (with config.yaml) "
            "or agent directories (each with a saved model's config.json)."
        )
    if not os.path.isfile(os.path.join(path, _MODEL_FILE)):
        raise ValueError(
            f"comlrl eval {argument}: {path} is neither a run directory (no config.yaml) nor a saved agent "
            "(no config.json); pass a run dir of `comlrl train`, or dirs written by save_model."
        )
    return path


def run_agents(run_dir: str) -> list[str]:
    """The final agents of a run directory: ``<run_dir>/agents/agent_<i>`` in agent order."""
    base = os.path.join(run_dir, "agents")
    if not os.path.isdir(base):
        raise FileNotFoundError(
            f"comlrl eval RUN: {run_dir} has no agents/ directory (the run saved no final model, e.g. "
            "output.save_final_model: false, or it has not finished); pass the agent "
            "directories with --agents DIR [DIR ...]."
        )
    names = [n for n in os.listdir(base) if n.startswith("agent_") and n[6:].isdigit()]
    dirs = [os.path.join(base, n) for n in sorted(names, key=lambda n: int(n[6:]))]
    if not dirs:
        raise FileNotFoundError(f"comlrl eval RUN: {base} holds no agent_<i> directories.")
    return [_check_agent_dir(d, "RUN") for d in dirs]


def resolve_sources(paths: Sequence[str], agents: Sequence[str]) -> tuple[str | None, list[str]]:
    """``(run_dir or None, agent dirs)`` from the positional paths and ``--agents``."""
    paths, agents = list(paths), list(agents)
    run_dir = None
    if len(paths) == 1 and _is_run_dir(paths[0]):
        run_dir = paths[0]
        paths = []
    elif any(_is_run_dir(p) for p in paths):
        raise ValueError(
            "comlrl eval RUN_OR_AGENTS: give one run directory, or agent directories, not both."
        )
    dirs = [_check_agent_dir(p, "RUN_OR_AGENTS") for p in paths]
    dirs += [_check_agent_dir(p, "--agents") for p in agents]
    if not dirs:
        if run_dir is None:
            raise ValueError(
                "comlrl eval needs a run directory (RUN) or agent directories (--agents DIR "
                "[DIR ...])."
            )
        dirs = run_agents(run_dir)
    return run_dir, dirs


def eval_run_file(run: dict[str, Any], agents: list[str], split: str | None, limit: int | None):
    """A copy of ``run`` that loads ``agents`` and evaluates ``split`` (no W&B, no saving)."""
    run = copy.deepcopy(run)
    run["agents"] = list(agents)
    run["wandb"] = None
    dataset = dict(run.get("dataset") or {})
    if split is not None:
        dataset["eval_split"] = split
    if limit is not None:
        if limit < 1:
            raise ValueError(f"comlrl eval --limit must be at least 1, got {limit}.")
        dataset["eval_limit"] = limit
    run["dataset"] = dataset
    output = dict(run.get("output") or {})
    output.update(save_final_model=False, verbose=False)
    run["output"] = output
    return run


def evaluate_run(
    run: dict[str, Any], agents: list[str], *, samples: int, seed: int, work_dir: str
) -> dict[str, Any]:
    """Build the run's trainer around ``agents`` and evaluate every eval item."""
    from comlrl.core.commands.launch import build_trainer
    from comlrl.core.loop.evaluation import evaluate_policy

    if samples < 1:
        raise ValueError(f"comlrl eval --samples must be at least 1, got {samples}.")
    trainer = build_trainer(run, work_dir)
    data = trainer.eval_dataset
    if data is None or len(data) == 0:
        task = run.get("task")
        raise ValueError(
            f"comlrl eval: the task {task!r} has no eval items with these settings; name an "
            "eval split with --split NAME (or dataset.eval_split in the run file)."
        )
    items = [data[i] for i in range(len(data))]
    results = evaluate_policy(trainer, items, samples=samples, seed=seed)
    return {
        "algorithm": run.get("algorithm"),
        "task": run.get("task"),
        "agents": [os.path.abspath(a) for a in agents],
        "split": (run.get("dataset") or {}).get("eval_split"),
        "num_items": len(items),
        "samples": samples,
        "seed": seed,
        **results,
    }


def format_table(result: dict[str, Any]) -> str:
    """The result as a text table: one metric per row, greedy and sampled columns."""
    greedy, sampled = result["greedy"], result["sampled"]
    keys = list(dict.fromkeys(list(greedy) + list(sampled)))
    head = ("metric", "greedy", f"sampled (k={result['samples']})")
    rows = [head] + [
        (k, _cell(greedy.get(k)), _cell(sampled.get(k))) for k in sorted(keys, key=_turn_order)
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [
        f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}".rstrip() for r in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _turn_order(key: str) -> tuple:
    head, _, rest = key.partition("/")
    if head.startswith("turn_") and head[5:].isdigit():
        return (int(head[5:]), rest)
    return (10**9, key)


def write_result(result: dict[str, Any], path: str) -> str:
    """Write ``result`` as JSON to ``path`` (atomically); returns the path."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"comlrl eval --out: the directory {parent} does not exist.")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def saved_run(run_dir: str) -> dict[str, Any]:
    """The run file a run directory was trained with."""
    return load_yaml(os.path.join(run_dir, _RUN_FILE))
