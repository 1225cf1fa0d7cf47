"""Child process of one trainer cell: ``python -m benchmarks.realsize.driver SPEC.json``.

Builds our trainer for the spec (the builders of :mod:`benchmarks.ours`), runs one ``train()``
and prints one tagged result line with the peak resident memory and the step time split into
decode (the sampling calls), scoring (log-prob and value forwards: the log-prob engine's entry
points) and backward+step (autograd's backward and every optimizer step). The engine's entry
points are wrapped *before* any family module is imported, so the families bind the wrapped
functions.
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
import time
from pathlib import Path


class Clock:
    """Seconds per phase; nested calls of one phase count once (the outermost)."""

    def __init__(self) -> None:
        self.seconds = {"scoring": 0.0, "backward": 0.0, "step": 0.0}
        self._depth = {name: 0 for name in self.seconds}
        self._step_start = 0.0

    def timed(self, phase: str, fn):
        """``fn`` with its wall time (and, for a generator result, each ``next``) in ``phase``."""

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._phase(phase):
                out = fn(*args, **kwargs)
            if hasattr(out, "__next__"):
                return self._timed_iter(phase, out)
            return out

        return wrapper

    def _timed_iter(self, phase, iterator):
        while True:
            with self._phase(phase):
                try:
                    item = next(iterator)
                except StopIteration:
                    return
            yield item

    def _phase(self, phase):
        clock = self

        class _Span:
            def __enter__(self):
                clock._depth[phase] += 1
                self.start = time.perf_counter()

            def __exit__(self, *exc):
                clock._depth[phase] -= 1
                if clock._depth[phase] == 0:
                    clock.seconds[phase] += time.perf_counter() - self.start
                return False

        return _Span()

    def install(self) -> None:
        """Wrap backward, the optimizer steps and the log-prob engine's entry points."""
        import torch
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        torch.autograd.backward = self.timed("backward", torch.autograd.backward)

        def pre(*_):
            self._step_start = time.perf_counter()

        def post(*_):
            self.seconds["step"] += time.perf_counter() - self._step_start

        register_optimizer_step_pre_hook(pre)
        register_optimizer_step_post_hook(post)
        from comlrl.core import logprobs
        from comlrl.core.logprobs import engine, kernels

        for module in (engine, kernels, logprobs):
            for name in ("token_logprobs", "token_logprobs_parts", "padded_forward"):
                if hasattr(module, name):
                    setattr(module, name, self.timed("scoring", getattr(module, name)))


def _rss_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 2**20
    raise RuntimeError("/proc/self/status has no VmRSS")


def run(spec: dict) -> dict:
    """One cell: build, train once, report memory and the phase split."""
    import torch

    torch.set_num_threads(spec["threads"])
    clock = Clock()
    clock.install()
    import comlrl.core.rollout.generation as generation
    import comlrl.core.rollout.mixed_adapters as mixed_adapters
    from benchmarks.ours import BUILDERS
    from benchmarks.portable.measure import GenerateMeter, environment, peak_rss_mib, seed_all

    meter = GenerateMeter()
    meter.attach_rows(generation)
    meter.attach_rows(mixed_adapters, "sample_mixed", depth=2)  # adapter agents of one base
    with tempfile.TemporaryDirectory(prefix="comlrl-realsize-") as run_dir:
        seed_all(spec["seed"])
        start = time.perf_counter()
        trainer = BUILDERS[spec["workload"]](spec, run_dir)(spec["epochs"], spec["num_items"])
        load_seconds = time.perf_counter() - start
        loaded_gb = _rss_gb()
        start, cpu_start = time.perf_counter(), time.process_time()
        trainer.train()
        seconds = time.perf_counter() - start
        cpu_seconds = time.process_time() - cpu_start
    backward_step = clock.seconds["backward"] + clock.seconds["step"]
    return {
        "status": "measured",
        "peak_rss_gb": peak_rss_mib() / 1024,
        "loaded_rss_gb": loaded_gb,
        "load_seconds": load_seconds,
        "train_seconds": seconds,
        # CPU seconds of every thread of the process: what the step costs when other work
        # shares the machine and stretches its wall time.
        "train_cpu_seconds": cpu_seconds,
        "decode_seconds": meter.seconds,
        "scoring_seconds": clock.seconds["scoring"],
        "backward_step_seconds": backward_step,
        "generated_tokens": meter.tokens,
        "env_steps": int(trainer.env_step),
        "environment": environment(),
    }


def main() -> None:
    from benchmarks.portable.measure import emit

    spec = json.loads(Path(sys.argv[1]).read_text())
    emit(run(spec))


if __name__ == "__main__":
    main()
