"""The timing protocol every side follows: a warm-up run, then one timed run.

A side provides ``build(epochs, num_items)`` returning an object with ``train()`` and
``env_step``, and ``install(trainer, meter)`` that routes its decoding through a
:class:`~.measure.GenerateMeter`. The warm-up (a few items) pays one-off costs
(lazy initialisation, first-call dispatch) outside the timed window; the timed run starts from freshly loaded models and the same seed.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

from .measure import GenerateMeter, memory_report, seed_all, sync


def timed_training(
    build: Callable[[int, int], object],
    install: Callable[[object, GenerateMeter], None],
    spec: dict,
) -> dict:
    """Warm up, then time ``train()`` on a fresh trainer; return timings and counters."""
    device = spec["device"]
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
