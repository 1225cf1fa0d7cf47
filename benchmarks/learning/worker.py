"""Train one catalogued run in the current process and summarise it as one result line."""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from typing import Any

from benchmarks.learning import measures
from benchmarks.learning.catalogue import BY_NAME, UNTRAINED
from benchmarks.learning.runfile import extra_rewards, run_file

# Keys copied from the last training record when a run logs them (what explains a score).
DIAGNOSTICS = (
    "dpo/accuracy",
    "reward_model/accuracy",
    "reward_model/heldout_accuracy",
    "centralized/parse_failures",
    "centralized/parsed",
)


POSTHOC_SAMPLES = 8
EVAL_KEY = "eval/turn_1/reward_mean"


def _posthoc(trainer, task: str, reward_func, samples: int) -> dict[str, float]:
    from benchmarks.learning.posthoc import length_ratio_items, posthoc_score

    items = length_ratio_items() if task == "length_ratio" else None
    return posthoc_score(trainer, items=items, reward_func=reward_func, samples_per_prompt=samples)


def _train(
    name: str, task: str, seed: int, max_steps: int | None, posthoc_samples: int
) -> dict[str, Any]:
    from comlrl.core.commands.launch import build_trainer
    from comlrl.core.logging.jsonl import read_metrics

    spec = BY_NAME[name]
    run, source = run_file(spec, task, seed)
    if max_steps is not None:
        run[spec.algorithm]["max_steps"] = max_steps
    out: dict[str, Any] = {"settings_source": source, "settings": run[spec.algorithm]}
    with tempfile.TemporaryDirectory(prefix="comlrl-learning-") as run_dir:
        with extra_rewards(spec):
            trainer = build_trainer(run, run_dir)
        task_reward = trainer.reward_func
        if spec.extra_rewards:
            # score the task's own reward, not the weighted training sum
            task_reward = trainer.reward_func.funcs[0]
        tokens = [0]
        add_tokens = trainer.timing.add_tokens

        def counting(count: int) -> None:
            if not trainer.timing.evaluating:
                tokens[0] += int(count)
            add_tokens(count)

        trainer.timing.add_tokens = counting
        wall, cpu = time.perf_counter(), time.process_time()
        if spec.kind != UNTRAINED:
            trainer.train()
        out["train_seconds"] = time.perf_counter() - wall
        out["train_cpu_seconds"] = time.process_time() - cpu
        out["generated_tokens"] = tokens[0]
        out.update(_posthoc(trainer, task, task_reward, posthoc_samples))
        path = os.path.join(run_dir, "metrics.jsonl")
        rows = read_metrics(path) if os.path.exists(path) else []
    train = [float(r[measures.REWARD_KEY]) for r in rows if measures.REWARD_KEY in r]
    out["train_first_quarter"], out["train_last_quarter"] = measures.quarters(train)
    out["logged_train_steps"] = len(train)
    # MADPO logs no training reward; its eval reward (the task's, on the eval prompts) still moves
    evals = [float(r[EVAL_KEY]) for r in rows if EVAL_KEY in r]
    out["eval_first_quarter"], out["eval_last_quarter"] = measures.quarters(evals)
    out["token_curve"] = measures.reward_curve(rows)
    for key in DIAGNOSTICS:
        values = [r[key] for r in rows if key in r]
        if values:
            out[key] = float(values[-1])
    return out


def run_one(
    name: str,
    task: str,
    seed: int,
    max_steps: int | None = None,
    posthoc_samples: int = POSTHOC_SAMPLES,
) -> dict[str, Any]:
    """Train catalogued run ``name`` on ``task`` with ``seed`` and return its result line.

    Any error (a setting that fails validation, a crash in training) is recorded in the line
    (``status: failed`` with the error) instead of raised, so one run never stops the others.
    ``max_steps`` caps the optimizer steps and ``posthoc_samples`` sets the samples per scoring
    prompt (both for quick checks; a line that changes them says so).
    """
    import torch

    # Workers run side by side on a small machine: one thread each keeps them from fighting.
    torch.set_num_threads(1)
    spec = BY_NAME[name]
    line: dict[str, Any] = {
        "run": name,
        "algorithm": spec.algorithm,
        "kind": spec.kind,
        "task": task,
        "seed": seed,
    }
    if max_steps is not None:
        line["max_steps"] = max_steps
    if posthoc_samples != POSTHOC_SAMPLES:
        line["posthoc_samples_per_prompt"] = posthoc_samples
    started = time.perf_counter()
    try:
        line.update(_train(name, task, seed, max_steps, posthoc_samples))
        line["status"] = "ok"
    except Exception as exc:  # recorded, not swallowed: the line carries the error
        line["status"] = "failed"
        line["error"] = f"{type(exc).__name__}: {exc}"
        line["traceback"] = traceback.format_exc(limit=8)
    line["seconds"] = time.perf_counter() - started
    return line
