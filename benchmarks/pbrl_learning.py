"""Learning of the preference family on the length-ratio demo, scored after training.

Each named run trains two tiny agents on the length-ratio task (``comlrl train``'s default run,
``comlrl.core.commands.launch.DEFAULT_RUN``, with the algorithm and section given below), then
scores the final agents on 192 joint samples: 24 prompts (the 20 built-in training topics, 16 of
them seen in training, and the 4 eval topics) x 8 aligned samples each, seeded per prompt and agent,
with the training sampling settings. The untrained agents score about 0.35.

It also reports what explains the score: the preference pairs (how many, how many items tied,
the reward gap, the winners' and losers' lengths per agent), the last DPO accuracy, and for
MARLHF the reward model's accuracy on its training pairs and on held-out pairs.

Usage::

    uv run --frozen python -m benchmarks.pbrl_learning --runs madpo_k24 magrpo --seeds 0 1
    uv run --frozen python -m benchmarks.pbrl_learning --list
    uv run --frozen python -m benchmarks.pbrl_learning --runs madpo_k24 --seeds 0 \
        --set dpo_nll_coef=1.0     # a named run with changed settings

The runs marked ``# examples/<name>.yaml`` below hold the settings of those example files
(tests/pbrl/test_demo_settings.py keeps them equal).

Run one process at a time: the wall times in the table are meant to be compared.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

# Sampling and model settings every run shares (those of the MAGRPO demo).
SAMPLING = {"max_new_tokens": 32, "temperature": 1.0, "top_p": 1.0, "top_k": None}
LOGGING = {"logging_steps": 1, "eval_interval": 8, "eval_num_samples": 4}

# The settings of the algorithms audit (docs of issue 14): the "before" rows.
AUDIT_DPO = {
    "num_train_epochs": 6,
    "preference_num_candidates": 6,
    "preference_pairs_per_sample": 4,
    "dpo_beta": 0.1,
    "agent_learning_rate": 1.0e-3,
    "train_batch_size": 4,
}
AUDIT_RLHF = {
    "num_train_epochs": 6,
    "num_generations": 4,
    "preference_num_candidates": 6,
    "preference_pairs_per_sample": 4,
    "reward_learning_rate": 1.0e-3,
    "reward_num_train_epochs": 3,
    "reward_train_batch_size": 4,
    "agent_learning_rate": 3.0e-3,
    "rollout_buffer_size": 4,
}

AUDIT_ITER = {
    "num_iterations": 4,
    "num_train_epochs": 1,
    "preference_num_candidates": 4,
    "comparator_num_candidates": 4,
    "preference_pairs_per_sample": 4,
    "dpo_beta": 0.1,
    "agent_learning_rate": 1.0e-3,
    "train_batch_size": 4,
}
HISTORY = {
    "comparator_policy": "history",
    "comparator_history_k": 1,
    "pair_selection": "comparator_reward",
    "preference_replay_mode": "lambda_decay",
    "preference_replay_lambda": 0.5,
}
# Online: the current agents against themselves, the largest reward gaps of all 4x4 pairs.
ONLINE = {
    "comparator_policy": "current",
    "comparator_pairing": "cross",
    "pair_selection": "reward_gap",
    "preference_replay_mode": "current",
}
AUDIT_RLHF_ITER = {
    **AUDIT_RLHF,
    "num_iterations": 3,
    "num_train_epochs": 2,
    "preference_num_candidates": 4,
    "comparator_num_candidates": 4,
    "comparator_policy": "current_copy",
    "preference_replay_mode": "nearest_k",
    "preference_replay_k": 2,
    "reward_num_train_epochs": 2,
}

K24 = {
    **AUDIT_DPO,
    "num_train_epochs": 2,
    "preference_num_candidates": 24,
    "preference_pairs_per_sample": 16,
    "train_batch_size": 16,
}

# name -> (algorithm, section overrides)
RUNS: dict[str, tuple[str, dict[str, Any]]] = {
    "untrained": ("magrpo", {}),  # built, never trained: the starting point
    "magrpo": ("magrpo", {}),
    "madpo_audit": ("madpo", dict(AUDIT_DPO)),
    "madpo_k24": ("madpo", dict(K24)),
    "madpo_k48": ("madpo", dict(K24, preference_num_candidates=48, preference_pairs_per_sample=32)),
    "madpo_k24_nll": ("madpo", dict(K24, dpo_nll_coef=1.0)),
    "madpo_iter_audit": ("madpo_iter", {**AUDIT_ITER, **HISTORY}),
    "madpo_iter_online": ("madpo_iter", dict(AUDIT_ITER, num_iterations=6, **ONLINE)),
    # the same generation budget as the MAGRPO demo: 2 + 2 candidates per item and iteration
    "madpo_iter_online_small": (
        "madpo_iter",
        dict(
            AUDIT_ITER,
            num_iterations=6,
            preference_num_candidates=2,
            comparator_num_candidates=2,
            train_batch_size=8,
            **ONLINE,
        ),
    ),
    # examples/madpo_iter.yaml
    "madpo_iter_online_ref": (
        "madpo_iter",
        dict(AUDIT_ITER, num_iterations=6, reference_free=False, **ONLINE),
    ),
    # examples/madpo.yaml
    "madpo_k24_ref": ("madpo", dict(K24, reference_free=False)),
    "madpo_iter_fast": (
        "madpo_iter",
        dict(
            AUDIT_ITER,
            num_iterations=3,
            reference_free=False,
            agent_learning_rate=2.0e-3,
            **ONLINE,
        ),
    ),
    "madpo_iter_online3": (
        "madpo_iter",
        dict(AUDIT_ITER, num_iterations=3, reference_free=False, **ONLINE),
    ),
    "madpo_iter_online3e2": (
        "madpo_iter",
        dict(AUDIT_ITER, num_iterations=3, num_train_epochs=2, reference_free=False, **ONLINE),
    ),
    "marlhf_audit": ("marlhf", dict(AUDIT_RLHF)),
    "marlhf_kl": ("marlhf", dict(AUDIT_RLHF, reference_kl_enabled=True, reference_kl_coef=0.1)),
    "marlhf_check": (
        "marlhf",
        dict(AUDIT_RLHF, reward_model_onpolicy_check=True),
    ),
    # examples/marlhf.yaml
    "marlhf_stop": (
        "marlhf",
        dict(AUDIT_RLHF, reward_model_onpolicy_check=True, rl_stop_accuracy=0.6),
    ),
    "marlhf_mean_stop": (
        "marlhf",
        dict(
            AUDIT_RLHF,
            reward_pooling="mean",
            reward_model_onpolicy_check=True,
            rl_stop_accuracy=0.6,
        ),
    ),
    "marlhf_mean_stop_k24": (
        "marlhf",
        dict(
            AUDIT_RLHF,
            reward_pooling="mean",
            reward_model_onpolicy_check=True,
            rl_stop_accuracy=0.6,
            preference_num_candidates=24,
            preference_pairs_per_sample=16,
            reward_train_batch_size=16,
        ),
    ),
    "madpo_iter_online2e3": (
        "madpo_iter",
        dict(AUDIT_ITER, num_iterations=2, num_train_epochs=3, reference_free=False, **ONLINE),
    ),
    "marlhf_iter_audit": ("marlhf_iter", dict(AUDIT_RLHF_ITER)),
    # examples/marlhf_iter.yaml
    "marlhf_iter_online": (
        "marlhf_iter",
        dict(
            AUDIT_RLHF_ITER,
            **ONLINE,
            preference_replay_k=None,
            num_iterations=3,
            num_train_epochs=2,
            reward_pooling="mean",
            reward_model_onpolicy_check=True,
            rl_stop_accuracy=0.6,
        ),
    ),
}


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings as a dict, each value read as YAML (``1e-3``, ``true``, ``null``)."""
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set: expected KEY=VALUE, got {item!r}.")
        out[key] = yaml.safe_load(value)
    return out


def with_overrides(name: str, overrides: dict[str, Any]) -> str:
    """Register run ``name`` with ``overrides`` applied, under a name that lists them."""
    algorithm, section = RUNS[name]
    label = name + "".join(f"+{k}={v}" for k, v in overrides.items())
    RUNS[label] = (algorithm, {**section, **overrides})
    return label


def _run_file(algorithm: str, section: dict[str, Any], seed: int) -> dict[str, Any]:
    from comlrl.core.commands.launch import DEFAULT_RUN

    run = copy.deepcopy(DEFAULT_RUN)
    run["algorithm"] = algorithm
    run["seed"] = seed
    run["output"]["verbose"] = False
    run["output"]["save_final_model"] = False
    run["checkpoint"]["enabled"] = False
    if algorithm == "magrpo":
        run["magrpo"].update(section)
    else:
        run[algorithm] = {**SAMPLING, **LOGGING, **section}
    return run


def posthoc_score(trainer, samples_per_prompt: int = 8, seed: int = 12345) -> dict[str, float]:
    """Mean task reward of ``trainer``'s current agents over the 24 length-ratio scoring prompts
    x ``samples_per_prompt`` joint samples (the learning benchmark's scorer)."""
    from benchmarks.learning.posthoc import length_ratio_items
    from benchmarks.learning.posthoc import posthoc_score as score
    from comlrl.tasks.length_ratio import length_ratio_reward

    return score(trainer, length_ratio_items(), length_ratio_reward, samples_per_prompt, seed)


def pair_stats(pairs) -> dict[str, float]:
    """How informative the preference pairs are: count, reward gap, winner/loser lengths."""
    if not pairs:
        return {"pairs": 0.0}
    out = {
        "pairs": float(len(pairs)),
        "pair_gap_mean": statistics.mean(p.winner_reward - p.loser_reward for p in pairs),
        "pair_winner_reward": statistics.mean(p.winner_reward for p in pairs),
        "pair_loser_reward": statistics.mean(p.loser_reward for p in pairs),
    }
    for i in range(len(pairs[0].winner_completions)):
        out[f"pair_winner_len{i}"] = statistics.mean(len(p.winner_completions[i]) for p in pairs)
        out[f"pair_loser_len{i}"] = statistics.mean(len(p.loser_completions[i]) for p in pairs)
    return out


def _last(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if key in r]
    return float(values[-1]) if values else None


def _quarters(rows: list[dict], key: str) -> tuple[float | None, float | None]:
    values = [r[key] for r in rows if key in r]
    if not values:
        return None, None
    q = max(1, len(values) // 4)
    return statistics.mean(values[:q]), statistics.mean(values[-q:])


def run_one(name: str, seed: int) -> dict[str, Any]:
    """Train run ``name`` with ``seed`` and return its summary."""
    from comlrl.core.commands.launch import build_trainer
    from comlrl.core.logging.jsonl import read_metrics

    algorithm, section = RUNS[name]
    run = _run_file(algorithm, section, seed)
    with tempfile.TemporaryDirectory(prefix="comlrl-pbrl-learning-") as run_dir:
        trainer = build_trainer(run, run_dir)
        start, cpu_start = time.perf_counter(), time.process_time()
        if name != "untrained":
            trainer.train()
        seconds = time.perf_counter() - start
        cpu_seconds = time.process_time() - cpu_start
        metrics_file = os.path.join(run_dir, "metrics.jsonl")
        rows = read_metrics(metrics_file) if os.path.exists(metrics_file) else []
        summary: dict[str, Any] = {"run": name, "algorithm": algorithm, "seed": seed}
        summary["train_seconds"] = seconds
        # CPU time is steadier than wall time on a shared machine
        summary["train_cpu_seconds"] = cpu_seconds
        summary.update(posthoc_score(trainer))
    pairs = getattr(trainer, "preference_pairs", None) or getattr(trainer, "iteration_pairs", None)
    if pairs:
        summary.update(pair_stats(pairs))
    for key in (
        "preference/tied_items",
        "preference/num_pairs",
        "dpo/accuracy",
        "dpo/loss",
        "reward_model/accuracy",
        "reward_model/heldout_accuracy",
        "reward_model/heldout_pairs",
        "reward_model/onpolicy_accuracy",
        "reward_model/onpolicy_task_reward",
        "rl/stopped",
    ):
        value = _last(rows, key)
        if value is not None:
            summary[key] = value
    checks = [
        r["reward_model/onpolicy_accuracy"] for r in rows if "reward_model/onpolicy_accuracy" in r
    ]
    if checks:
        summary["onpolicy_accuracy_by_epoch"] = checks
    first, last = _quarters(rows, "eval/turn_1/reward_mean")
    summary["eval_first_quarter"], summary["eval_last_quarter"] = first, last
    first, last = _quarters(rows, "turn_1/reward_mean")
    summary["train_first_quarter"], summary["train_last_quarter"] = first, last
    summary["settings"] = section
    return summary


def table(results: list[dict[str, Any]]) -> str:
    """A markdown table: one row per run name, seeds side by side."""
    order = list(RUNS)
    names = sorted(
        dict.fromkeys(r["run"] for r in results),
        key=lambda n: order.index(n) if n in order else len(order),
    )
    seeds = sorted({r["seed"] for r in results})
    head = ["run", *[f"post-hoc (seed {s})" for s in seeds], "train s", "CPU s", "pairs", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        rows = {r["seed"]: r for r in results if r["run"] == name}
        scores = [f"{rows[s]['posthoc_reward']:.3f}" if s in rows else "—" for s in seeds]
        secs = statistics.mean(r["train_seconds"] for r in rows.values())
        cpus = [r["train_cpu_seconds"] for r in rows.values() if "train_cpu_seconds" in r]
        cpu = f"{statistics.mean(cpus):.0f}" if cpus else "—"
        pairs = [r.get("pairs") for r in rows.values() if r.get("pairs") is not None]
        rm = [r.get("reward_model/heldout_accuracy") for r in rows.values()]
        note = ""
        if any(v is not None for v in rm):
            note = "held-out RM acc " + " / ".join(f"{v:.2f}" for v in rm if v is not None)
        checks = [r["onpolicy_accuracy_by_epoch"] for r in rows.values() if r.get("rl/stopped")]
        if checks and rows[min(rows)]["algorithm"] == "marlhf":
            note += "; RL stopped after epoch " + " / ".join(str(len(c)) for c in checks)
        ranges = [r["onpolicy_accuracy_by_epoch"] for r in rows.values() if r.get("rl/stopped")]
        if ranges and rows[min(rows)]["algorithm"] != "marlhf":
            note += "; on-policy RM acc " + " / ".join(f"{min(c):.2f}–{max(c):.2f}" for c in ranges)
        pair_text = f"{statistics.mean(pairs):.0f}" if pairs else "—"
        lines.append(
            f"| {name} | " + " | ".join(scores) + f" | {secs:.0f} | {cpu} | {pair_text} | {note} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=None, help="run names (see --list)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--json", default=None, help="append each summary to this JSONL file")
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="override settings of every named run (YAML values); the run is recorded as "
        "NAME+KEY=VALUE",
    )
    parser.add_argument("--list", action="store_true", help="list the run names and exit")
    parser.add_argument("--table", default=None, help="print the table of a --json file and exit")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: steady on a shared machine)"
    )
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    if args.table:
        with open(args.table) as fh:
            print(table([json.loads(line) for line in fh if line.strip()]))
        return 0
    if args.list:
        for name, (algorithm, section) in RUNS.items():
            print(f"{name}: {algorithm} {json.dumps(section)}")
        return 0
    names = args.runs or list(RUNS)
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        parser.error(f"unknown run name(s) {unknown}; valid: {sorted(RUNS)}")
    overrides = parse_overrides(args.set)
    results = []
    for name in names:
        if overrides:
            name = with_overrides(name, overrides)
        for seed in args.seeds:
            summary = run_one(name, seed)
            results.append(summary)
            print(json.dumps(summary), flush=True)
            if args.json:
                with open(args.json, "a") as fh:
                    fh.write(json.dumps(summary) + "\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
