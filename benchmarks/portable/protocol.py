"""The timing protocol every side follows: a warm-up run, then one timed run.

A side provides ``build(epochs, num_items)`` returning an object with ``train()`` and
``env_step``, and ``install(trainer, meter)`` that routes its decoding through a
:class:`~.measure.GenerateMeter`. The warm-up (a few items) pays one-off costs
(lazy initialisation, first-call dispatch) outside the timed window; the timed run starts from freshly loaded models and the same seed.

:func:`run_specs` runs one spec or a list of them in one process (the GPU check runs every
workload of a side in one process, so each side pays the interpreter and CUDA start once).
"""

from __future__ import annotations

import gc
import time
import traceback
from collections.abc import Callable

from .measure import GenerateMeter, memory_report, reset_peak_memory, seed_all, sync


def timed_training(
    build: Callable[[int, int], object],
    install: Callable[[object, GenerateMeter], None],
    spec: dict,
) -> dict:
    """Warm up, then time ``train()`` on a fresh trainer; return timings and counters."""
    device = spec["device"]
    reset_peak_memory(device)
    if spec.get("warmup_epochs", 0) > 0:
        seed_all(spec["seed"])
        warm = build(spec["warmup_epochs"], spec["warmup_items"])
        warm.train()
        del warm
        gc.collect()
    trainer = build(spec["epochs"], spec["num_items"])
    meter = GenerateMeter()
    install(trainer, meter)
    seed_all(spec["seed"])
    sync(device)
    start, cpu_start = time.perf_counter(), time.process_time()
    trainer.train()
    sync(device)
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    out = {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "env_steps": int(trainer.env_step),
        "epochs": spec["epochs"],
    }
    out.update(meter.as_dict())
    out.update(memory_report(device))
    return out


def run_specs(specs, run_one: Callable[[dict], dict], emit: Callable[[dict], None]) -> None:
    """Run and emit one spec, or each spec of a list in turn.

    A single spec's error propagates (the process fails). In a list each spec's result carries
    its ``workload``, and a spec that raises is emitted as ``{"workload", "error"}`` with the
    traceback, so one broken workload is reported as failed without losing the others.
    """
    if isinstance(specs, dict):
        emit(run_one(specs))
        return
    for spec in specs:
        try:
            result = run_one(spec)
        except Exception:  # reported in the result line, never dropped
            result = {"error": traceback.format_exc(limit=20)[-6000:]}
        result["workload"] = spec["workload"]
        emit(result)
        gc.collect()
        _empty_device_cache(spec.get("device", "cpu"))


def _empty_device_cache(device: str) -> None:
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()
