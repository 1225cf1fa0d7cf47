"""Does centralized MAGRPO learn in its demo? Train it, then score the saved writer post hoc.

Each run trains ``examples/centralized_magrpo.yaml`` (its own budget and settings, optionally
overridden with ``--set key=value`` for the ``centralized_magrpo`` section) with a seed, then
scores the writer on the same 24 prompts x 8 joint samples as ``benchmarks.pbrl_learning``
(seeded per prompt). The post-hoc reward is the task reward of the split role outputs (a missing
role is an empty answer), so it compares with the decentralized agents' post-hoc reward. It also
reports the share of joint completions with a complete layout, and the first- and last-quarter
parse-failure rate of the training records.

Usage::

    uv run --frozen python -m benchmarks.centralized_learning --seeds 0 1
    uv run --frozen python -m benchmarks.centralized_learning --seeds 0 --set layout_warmup_steps=0

Run one process at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "centralized_magrpo.yaml"


def posthoc_centralized(trainer, samples_per_prompt: int = 8, seed: int = 12345) -> dict:
    """Task reward of the writer's split outputs over the 24 scoring prompts."""
    from benchmarks.learning.posthoc import length_ratio_items, posthoc_score

    scores = posthoc_score(trainer, length_ratio_items(), None, samples_per_prompt, seed)
    return {
        "posthoc_reward": scores["posthoc_reward"],
        "posthoc_credited_reward": scores["posthoc_credited_reward"],
        "posthoc_complete_layouts": scores["posthoc_complete_layouts"],
        "posthoc_len_role0": scores["posthoc_len_agent0"],
        "posthoc_len_role1": scores["posthoc_len_agent1"],
    }


def _quarters(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    q = max(1, len(values) // 4)
    return statistics.mean(values[:q]), statistics.mean(values[-q:])


def run_one(seed: int, overrides: dict[str, Any], train: bool = True) -> dict[str, Any]:
    """Train the demo with ``seed`` (and ``overrides``) and return its summary."""
    from comlrl.core.commands.launch import build_trainer
    from comlrl.core.config.yaml_io import load_yaml
    from comlrl.core.logging.jsonl import read_metrics

    run = load_yaml(str(EXAMPLE))
    run["seed"] = seed
    run["output"].update(verbose=False, save_final_model=False)
    run["centralized_magrpo"].update(overrides)
    with tempfile.TemporaryDirectory(prefix="comlrl-centralized-") as run_dir:
        trainer = build_trainer(run, run_dir)
        start = time.perf_counter()
        if train:
            trainer.train()
        summary: dict[str, Any] = {"seed": seed, "trained": train, "settings": overrides}
        summary["train_seconds"] = time.perf_counter() - start
        path = os.path.join(run_dir, "metrics.jsonl")
        rows = read_metrics(path) if os.path.exists(path) else []
    key = "centralized/parse_failure_rate"
    rates = [r[key] for r in rows if key in r and "turn_1/reward_mean" in r]
    summary["parse_failure_first_quarter"], summary["parse_failure_last_quarter"] = _quarters(rates)
    rewards = [r["turn_1/reward_mean"] for r in rows if "turn_1/reward_mean" in r]
    summary["train_first_quarter"], summary["train_last_quarter"] = _quarters(rewards)
    summary.update(posthoc_centralized(trainer))
    return summary


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--set", nargs="*", default=[], help="centralized_magrpo key=value")
    parser.add_argument("--untrained", action="store_true", help="score without training")
    parser.add_argument("--json", default=None, help="append each summary to this JSONL file")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    overrides = {}
    for pair in args.set:
        key, sep, value = pair.partition("=")
        if not sep:
            parser.error(f"--set expects key=value, got {pair!r}")
        overrides[key] = _value(value)
    for seed in args.seeds:
        summary = run_one(seed, overrides, train=not args.untrained)
        print(json.dumps(summary), flush=True)
        if args.json:
            with open(args.json, "a") as fh:
                fh.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
