"""Timers, counters and memory readings shared by every side of a benchmark."""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time

import torch

RESULT_PREFIX = "BENCH_RESULT "


class GenerateMeter:
    """Wraps ``model.generate`` on one model instance: counts calls, new tokens and seconds.

    A row's new tokens run up to and including its first EOS (or the whole row if it has none),
    which is what every side keeps as the completion.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.tokens = 0
        self.sequences = 0
        self.seconds = 0.0
        self.cpu_seconds = 0.0

    def attach(self, model, eos_id: int) -> None:
        """Route ``model.generate`` through this meter."""
        original = model.generate

        def counted(*args, **kwargs):
            start, cpu_start = time.perf_counter(), time.process_time()
            out = original(*args, **kwargs)
            seqs = out if isinstance(out, torch.Tensor) else out.sequences
            prompt = kwargs.get("input_ids")
            width = prompt.shape[1] if prompt is not None else args[0].shape[1]
            new = seqs[:, width:]
            is_eos = new == eos_id
            first = is_eos.int().argmax(dim=1)
            lengths = torch.where(is_eos.any(dim=1), first + 1, new.shape[1])
            self.tokens += int(lengths.sum())
            self.sequences += int(new.shape[0])
            self.calls += 1
            self.seconds += time.perf_counter() - start
            self.cpu_seconds += time.process_time() - cpu_start
            return out

        model.generate = counted

    def attach_rows(self, module, name: str = "sample_rows", depth: int = 0) -> None:
        """Route ``module.<name>`` (a function returning completion rows trimmed through EOS,
        such as comlrl's ``sample_rows``) through this meter. ``depth`` levels of lists around
        the rows are flattened first (comlrl's mixed-adapter ``sample_mixed`` returns rows per
        agent and prompt: depth 2)."""
        original = getattr(module, name)

        def counted(*args, **kwargs):
            start, cpu_start = time.perf_counter(), time.process_time()
            out = original(*args, **kwargs)
            rows = out
            for _ in range(depth):
                rows = [r for group in rows for r in group]
            self.tokens += sum(len(r) for r in rows)
            self.sequences += len(rows)
            self.calls += 1
            self.seconds += time.perf_counter() - start
            self.cpu_seconds += time.process_time() - cpu_start
            return out

        setattr(module, name, counted)

    def as_dict(self) -> dict:
        return {
            "generate_calls": self.calls,
            "generated_tokens": self.tokens,
            "generated_sequences": self.sequences,
            "generate_s": self.seconds,
            "generate_cpu_s": self.cpu_seconds,
        }


def sync(device: str) -> None:
    """Wait for queued GPU work so wall-clock timings are honest."""
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()


def _vm_hwm_kib() -> int | None:
    """``VmHWM`` of ``/proc/self/status`` (KiB), or None without procfs."""
    if not os.path.exists("/proc/self/status"):
        return None
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def peak_rss_mib() -> float:
    """Peak resident set size of this process's own address space, in MiB.

    On Linux this is ``VmHWM``: ``ru_maxrss`` survives ``exec`` and so starts at the launching
    process's footprint (a runner that built a model first would lend every side its peak).
    Elsewhere ``ru_maxrss`` (macOS reports bytes).
    """
    hwm = _vm_hwm_kib()
    if hwm is not None:
        return hwm / 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def reset_peak_memory(device: str) -> None:
    """Start a new peak-memory window on the GPU (several runs share one process)."""
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def memory_report(device: str) -> dict:
    """Peak host memory, plus peak accelerator memory when the run used one."""
    out = {"peak_rss_mib": peak_rss_mib()}
    if device.startswith("cuda") and torch.cuda.is_available():
        out["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def resolve_device(name: str) -> str:
    """``auto`` picks the first GPU when there is one."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def environment() -> dict:
    """Versions and hardware of the process that produced a result."""
    import transformers

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(),
        # the kernel set torch dispatches to (AVX512, AVX2, ...; ATEN_CPU_CAPABILITY forces one)
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def emit(result: dict) -> None:
    """Print the result as one tagged JSON line (stdout may carry other output too)."""
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()


def seed_all(seed: int) -> None:
    """Seed Python, NumPy and torch the same way on every side."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
