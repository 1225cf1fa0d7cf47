"""Run catalogued jobs in worker processes and append each result line as it finishes."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any

from benchmarks.learning.catalogue import RunSpec
from benchmarks.learning.worker import POSTHOC_SAMPLES, run_one

Job = tuple[str, str, int]  # (run name, task, seed)


def jobs(specs: Sequence[RunSpec], seeds: Sequence[int], tasks: Sequence[str] | None) -> list[Job]:
    """Every (run, task, seed) of ``specs``; ``tasks`` limits the tasks (None: each run's own)."""
    out = []
    for spec in specs:
        for task in spec.tasks():
            if tasks is None or task in tasks:
                out.extend((spec.name, task, seed) for seed in seeds)
    return out


def default_jobs(
    specs: Sequence[RunSpec],
    seeds: Sequence[int],
    code_seeds: Sequence[int],
    tasks: Sequence[str] | None,
) -> list[Job]:
    """``jobs`` with ``seeds`` on length ratio and ``code_seeds`` on the code task, the slowest
    runs first (so that no worker is left with a long run at the end while the other idles)."""
    out = [job for job in jobs(specs, seeds, tasks) if job[1] != "coding"]
    out += [job for job in jobs(specs, code_seeds, tasks) if job[1] == "coding"]
    return sorted(out, key=lambda job: -SLOW.get((job[0], job[1]), 0))


# Runs that take several times a MAGRPO demo run (seconds measured on the table's machine);
# only their order matters.
SLOW = {
    ("centralized_magrpo", "coding"): 190,
    ("madpo_iter_defaults", "length_ratio"): 85,
    ("marlhf_iter_defaults", "length_ratio"): 66,
    ("madpo_iter", "length_ratio"): 54,
    ("centralized_magrpo", "length_ratio"): 46,
    ("marlhf_iter", "length_ratio"): 34,
    ("madpo_defaults", "length_ratio"): 34,
}


def _commit() -> str:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        sha = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            # results files change during runs; any other change or new file is "dirty"
            ["git", "-C", root, "status", "--porcelain", "--", ".", ":!benchmarks/results"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha


def machine() -> str:
    """CPU model, core count and torch version: what the timings depend on."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            names = [ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")]
        model = names[0] if names else model
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, torch {torch.__version__}"


def progress(done: int, total: int, line: dict[str, Any]) -> str:
    """One line per finished run."""
    head = f"[{done}/{total}] {line['run']} {line['task']} seed {line['seed']}"
    if line.get("status") != "ok":
        return f"{head}: FAILED {line.get('error', '').splitlines()[0][:200]}"
    return f"{head}: post-hoc {line['posthoc_reward']:.3f} in {line['seconds']:.0f} s"


def run_all(
    todo: Sequence[Job],
    results: str,
    workers: int,
    command: str,
    max_steps: int | None = None,
    posthoc_samples: int = POSTHOC_SAMPLES,
) -> list[dict[str, Any]]:
    """Run ``todo`` on ``workers`` processes (1: in this process), appending each line to
    ``results`` and printing its progress line; return the lines."""
    stamp = {
        "command": command,
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
        "commit": _commit(),
    }
    os.makedirs(os.path.dirname(os.path.abspath(results)), exist_ok=True)
    lines: list[dict[str, Any]] = []

    def finish(line: dict[str, Any]) -> None:
        line.update(stamp)
        lines.append(line)
        with open(results, "a") as fh:
            fh.write(json.dumps(line) + "\n")
        print(progress(len(lines), len(todo), line), flush=True)

    if workers == 1:
        for name, task, seed in todo:
            finish(run_one(name, task, seed, max_steps, posthoc_samples))
        return lines
    # spawn: a fresh interpreter per worker (forking a process that holds torch state is unsafe)
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = {
            pool.submit(run_one, n, t, s, max_steps, posthoc_samples): (n, t, s) for n, t, s in todo
        }
        for future in as_completed(futures):
            name, task, seed = futures[future]
            try:
                line = future.result()
            except Exception as exc:  # the worker process itself died (e.g. out of memory)
                line = {"run": name, "task": task, "seed": seed, "status": "failed"}
                line["error"] = f"{type(exc).__name__}: {exc}"
            finish(line)
    return lines
