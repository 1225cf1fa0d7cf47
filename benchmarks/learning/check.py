"""`python -m benchmarks.learning check`: re-run a fixed subset and compare with the table.

Per-seed trajectories depend on the machine's float kernels (another CPU rounds differently and
RL amplifies it), so a re-run on another machine is not expected to give the published value of
each seed. What should reproduce is the spread: each new post-hoc reward should lie inside the
published min–max of its row, widened by ``MARGIN``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.learning.catalogue import CHECK_RUNS, CHECK_SEEDS
from benchmarks.learning.table import read_results, seed_stats

# How far outside the published min–max a new value may fall and still pass: the published
# rows have 4 seeds, so a fifth seed (or another machine's seed) can land a little outside.
MARGIN = 0.10
TASK = "length_ratio"


@dataclass(frozen=True)
class Verdict:
    """One re-run seed of one row against the published range."""

    run: str
    seed: int
    value: float | None
    low: float | None
    high: float | None
    margin: float
    error: str = ""

    @property
    def ok(self) -> bool:
        """Inside ``[low - margin, high + margin]`` (a failed run or a missing row fails)."""
        if self.value is None or self.low is None or self.high is None:
            return False
        return self.low - self.margin <= self.value <= self.high + self.margin

    def line(self) -> str:
        """One printed line: the value, the allowed range and the verdict."""
        head = f"{self.run} seed {self.seed}"
        if self.low is None or self.high is None:
            return f"{head}: FAIL (no published result for this row; run the full table first)"
        if self.value is None:
            return f"{head}: FAIL (the run failed: {self.error})"
        allowed = f"[{self.low - self.margin:.2f}, {self.high + self.margin:.2f}]"
        published = f"published {self.low:.2f}–{self.high:.2f} ± {self.margin:.2f}"
        word = "ok" if self.ok else "FAIL"
        return f"{head}: post-hoc {self.value:.3f} in {allowed} ({published}): {word}"


def published_range(results: Sequence[dict[str, Any]], run: str) -> tuple[float, float] | None:
    """The min and max post-hoc reward of ``run`` on length ratio over its published seeds."""
    values = [
        line["posthoc_reward"]
        for line in results
        if line["run"] == run and line["task"] == TASK and line.get("status") == "ok"
    ]
    stats = seed_stats(values)
    return (stats[1], stats[2]) if stats else None


def compare(
    published: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]], margin: float = MARGIN
) -> list[Verdict]:
    """Each new line of ``new`` against its row's published range in ``published``."""
    out = []
    for line in sorted(new, key=lambda ln: (ln["run"], ln["seed"])):
        rng = published_range(published, line["run"])
        ok = line.get("status") == "ok"
        out.append(
            Verdict(
                run=line["run"],
                seed=line["seed"],
                value=line.get("posthoc_reward") if ok else None,
                low=rng[0] if rng else None,
                high=rng[1] if rng else None,
                margin=margin,
                error="" if ok else str(line.get("error", "")).splitlines()[0][:200],
            )
        )
    return out


def run_check(
    results_path: str,
    workers: int = 2,
    margin: float = MARGIN,
    runs: Sequence[str] = CHECK_RUNS,
    seeds: Sequence[int] = CHECK_SEEDS,
    out_path: str | None = None,
) -> int:
    """Re-run ``runs`` x ``seeds`` on length ratio, print one verdict per seed and return the
    exit status (0: every value inside its widened range, 1: not). The new lines go to
    ``out_path`` (default: a temporary file), never to the published results."""
    from benchmarks.learning import catalogue, runner

    if margin < 0:
        raise SystemExit(f"--margin must be at least 0, got {margin}.")
    if not os.path.exists(results_path):
        raise SystemExit(f"{results_path}: no published results; run the full table first.")
    published = read_results(results_path)
    todo = runner.jobs(catalogue.select(list(runs)), list(seeds), [TASK])
    command = "python -m benchmarks.learning check"
    with tempfile.TemporaryDirectory(prefix="comlrl-learning-check-") as tmp:
        target = out_path or os.path.join(tmp, "check.jsonl")
        new = runner.run_all(todo, target, workers, command)
    verdicts = compare(published, new, margin)
    print(f"\ncheck: {len(verdicts)} runs against {os.path.relpath(results_path)}")
    for verdict in verdicts:
        print(verdict.line())
    failed = [v for v in verdicts if not v.ok]
    if failed:
        print(f"check FAILED: {len(failed)} of {len(verdicts)} outside the published range")
        return 1
    print("check passed: every value inside the published min–max ± margin")
    return 0
