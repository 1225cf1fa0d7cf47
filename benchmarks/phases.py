"""Where the time goes on ``magrpo_random``: per-phase CPU seconds of our side and of the plain
HF loop, each run in a fresh process, the two sides alternating.

    uv run --frozen python -m benchmarks.phases                      # tiny and small, 3 runs
    uv run --frozen python -m benchmarks.phases --sizes tiny --repeats 5
    ATEN_CPU_CAPABILITY=avx2 uv run --frozen python -m benchmarks.phases

Each run follows the benchmark protocol (:mod:`benchmarks.portable.protocol`: a warm-up on two
items, then a fresh trainer under the timer, one torch thread) and adds up the process CPU time
spent inside a few functions (plain wrappers, no profiler, so Python-heavy code is not
inflated as under ``cProfile``): on our side decoding (``sample_rows``), the update
(``MAGRPOTrainer.update``), its forwards and backwards (``accumulate_gradients``) and the backward
calls alone; on the plain side ``generate`` with its detokenization, the update (its ``_step``),
the backward calls and AdamW. ``other`` is the rest of the run (rewards, records, bookkeeping).
The printed table gives the median of each phase.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PREFIX = "PHASES "


def _timed(owner, name: str, label: str, acc: dict) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            acc[label] += time.process_time() - start

    setattr(owner, name, wrapper)


def _child(side: str, size: str) -> None:
    import torch

    from benchmarks.portable.protocol import timed_training
    from benchmarks.runner import build_spec
    from benchmarks.workloads import WORKLOADS

    spec = build_spec(WORKLOADS["magrpo_random"], size, device="cpu", threads=1, seed=0)
    torch.set_num_threads(1)
    acc: dict = collections.defaultdict(float)
    _timed(torch.Tensor, "backward", "backward", acc)
    if side == "ours":
        import comlrl.core.rollout.generation as generation
        import comlrl.core.training.train_step as train_step
        from benchmarks.ours import magrpo_builder
        from comlrl.reinforce.magrpo import MAGRPOTrainer

        _timed(generation, "sample_rows", "decode", acc)
        _timed(MAGRPOTrainer, "update", "update", acc)
        _timed(train_step, "accumulate_gradients", "forward+backward", acc)
        build = magrpo_builder(spec, tempfile.mkdtemp(prefix="comlrl-phases-"))
    else:
        import benchmarks.plainhf as plainhf

        _timed(plainhf.PlainHFMAGRPO, "_generate", "decode", acc)
        _timed(plainhf.PlainHFMAGRPO, "_step", "update", acc)
        _timed(torch.optim.AdamW, "step", "optimizer", acc)

        def build(epochs, items):
            return plainhf.PlainHFMAGRPO(spec, epochs, items)

    def reset_after_warmup(trainer, meter) -> None:  # the protocol's install hook
        acc.clear()

    result = timed_training(build, reset_after_warmup, spec)
    phases = dict(acc)
    phases["other"] = result["cpu_seconds"] - phases.get("decode", 0.0) - phases.get("update", 0.0)
    print(PREFIX + json.dumps({"total": result["cpu_seconds"], **phases}), flush=True)


def _run(side: str, size: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    env["WANDB_MODE"] = "disabled"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.phases", "--child", side, size],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith(PREFIX):
            return json.loads(line[len(PREFIX) :])
    raise RuntimeError(f"{side}/{size} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


_COLUMNS = ("decode", "update", "forward+backward", "backward", "optimizer", "other", "total")


def _median(runs: list[dict], key: str) -> str:
    values = [r[key] for r in runs if key in r]
    return f"{statistics.median(values):.2f}" if values else "–"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.phases", description=__doc__)
    p.add_argument("--sizes", nargs="+", default=["tiny", "small"], choices=["tiny", "small"])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--child", nargs=2, metavar=("SIDE", "SIZE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    from benchmarks.runner import machine_line

    print(machine_line())
    print(
        "| model | side | runs | decode | update | of it: forward+backward | backward | "
        "AdamW | other | whole run |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        runs: dict[str, list[dict]] = {"ours": [], "plainhf": []}
        for rep in range(args.repeats):
            for side in ("ours", "plainhf") if rep % 2 == 0 else ("plainhf", "ours"):
                runs[side].append(_run(side, size))
        for side, found in runs.items():
            cells = [_median(found, key) for key in _COLUMNS]
            print(f"| {size} | {side} | {len(found)} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
