"""Learning check: the default length-ratio demo run, on a fixed seed, with its final reward.

A before/after tool for one machine (per-seed numbers differ between CPUs); the learning
table's re-run check against its published spread is ``python -m benchmarks.learning check``.

The optimizations must not change what MAGRPO learns. This runs ``comlrl train``'s default run
(MAGRPO, two tiny agents, length ratio; see ``comlrl.core.commands.launch.DEFAULT_RUN``) with seed 0
and prints the mean training reward over the first and last quarter of the logged steps and the last
eval reward. Compare the numbers before and after a change to the hot paths.

Usage: ``uv run --frozen python -m benchmarks.learning_check [--seed 0] [--json OUT]``
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time


def run(seed: int) -> dict:
    """Train the demo run once and summarise its rewards."""
    from comlrl.core.commands.launch import DEFAULT_RUN, build_trainer
    from comlrl.core.logging.jsonl import read_metrics

    config = copy.deepcopy(DEFAULT_RUN)
    config["seed"] = seed
    config["output"]["verbose"] = False
    config["checkpoint"]["enabled"] = False
    with tempfile.TemporaryDirectory(prefix="comlrl-learning-") as run_dir:
        trainer = build_trainer(config, run_dir)
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
        rows = read_metrics(f"{run_dir}/metrics.jsonl")
    train = [r["turn_1/reward_mean"] for r in rows if "turn_1/reward_mean" in r]
    evals = [r["eval/turn_1/reward_mean"] for r in rows if "eval/turn_1/reward_mean" in r]
    quarter = max(1, len(train) // 4)
    return {
        "seed": seed,
        "config": config["magrpo"],
        "train_reward_first_quarter": statistics.mean(train[:quarter]),
        "train_reward_last_quarter": statistics.mean(train[-quarter:]),
        "final_eval_reward": evals[-1] if evals else None,
        "logged_train_steps": len(train),
        "seconds": seconds,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the summary to this file")
    args = parser.parse_args(argv)
    summary = run(args.seed)
    print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(summary, fh, indent=2)
            fh.write("\n")


if __name__ == "__main__":
    sys.exit(main())
