"""Runs every side of a workload in its own process and turns the results into ratios.

Sides: ``ours`` (comlrl's trainer), ``bare`` (the bare-torch lower bound, on comlrl's kernels),
``plainhf`` (the independent yardstick: stock ``generate`` and one padded forward per buffer,
no comlrl code; MAGRPO workloads only), ``reference`` (comlrl 1.4.3 in its own venv) and
``trl`` (TRL's GRPOTrainer, one agent, in its own venv; ``magrpo_random`` only). Each run is a
fresh process, so peak RSS is per side. Repeats
are interleaved so slow drifts of a shared machine hit every side alike, and the median run
counts.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.portable.measure import RESULT_PREFIX
from benchmarks.workloads import Workload

ROOT = Path(__file__).resolve().parent.parent
PORTABLE = Path(__file__).resolve().parent / "portable"
SIDES = ("reference", "bare", "ours", "plainhf", "trl")

# Acceptance targets from the performance issue: (max overhead ratio, min speed-up per size).
TARGETS = {
    "magrpo": (1.15, {"tiny": 4.0, "small": 2.2}),
    "iac": (1.25, {"small": 3.0}),
    "maac": (1.25, {"small": 3.0}),
    "madpo": (1.25, {"small": 3.0}),
}
# Minimum speed-up over the plain-HF yardstick per size (issue 18, untrained-style models).
PLAIN_TARGETS = {
    "magrpo_untrained": {"tiny": 1.5, "small": 1.1},
    "magrpo_random": {"tiny": 1.5, "small": 1.2},
}
# Minimum speed-up over TRL's GRPOTrainer (one agent) per size.
TRL_TARGETS = {"magrpo_random": {"tiny": 2.0, "small": 2.0}}


def result_name(workload: str, size: str, device: str) -> str:
    """The file a workload's result is written to: ``<workload>-<size>-<device>.json``, with
    the forced kernel set appended (``-avx2.json``) when ``ATEN_CPU_CAPABILITY`` is set, so a
    run on the other kernel set does not overwrite the native one."""
    forced = os.environ.get("ATEN_CPU_CAPABILITY")
    suffix = f"-{forced.lower()}" if forced else ""
    return f"{workload}-{size}-{device.split(':')[0]}{suffix}.json"


def kernel_set() -> str:
    """The CPU kernels torch dispatches to in this process (``AVX512``, ``AVX2``, ...), with
    ``ATEN_CPU_CAPABILITY`` when it is set (a run forced to another kernel set)."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    forced = os.environ.get("ATEN_CPU_CAPABILITY")
    return f"{capability} (ATEN_CPU_CAPABILITY={forced})" if forced else capability


def machine() -> dict:
    """What the numbers were measured on."""
    info = {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    try:
        with open("/proc/cpuinfo") as fh:
            names = [ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")]
        info["cpu"] = names[0] if names else platform.processor()
        with open("/proc/meminfo") as fh:
            info["mem_total_gib"] = round(int(fh.readline().split()[1]) / 2**20, 1)
    except OSError:
        info["cpu"] = platform.processor()
    info["torch_cpu_capability"] = kernel_set()
    if hasattr(os, "getloadavg"):
        info["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    return info


def machine_line(info: dict | None = None) -> str:
    """One line naming the CPU, torch's kernel set and the load, printed before every run."""
    info = info or machine()
    return (
        f"[benchmarks] CPU: {info.get('cpu')} ({info.get('cpu_count')} cores) | torch kernels: "
        f"{info.get('torch_cpu_capability')} | load average: {info.get('load_average_at_start')}"
    )


def command(
    side: str, spec_path: str, reference_python: Path | None, python: str | None = None
) -> list[str]:
    """The process that runs one side (``python``: another checkout's interpreter)."""
    if side in ("ours", "bare", "plainhf"):
        return [python or sys.executable, "-m", f"benchmarks.{side}", spec_path]
    if side == "trl":
        from benchmarks.refvenv import trl_python

        return [str(trl_python()), str(Path(__file__).resolve().parent / "trl_side.py"), spec_path]
    if reference_python is None:
        raise ValueError("the reference side needs the reference venv's python")
    return [str(reference_python), str(PORTABLE / "reference_driver.py"), spec_path]


def run_side(
    side: str,
    spec: dict,
    reference_python: Path | None,
    timeout: float,
    checkout: Path | None = None,
) -> dict:
    """Run one side once; return its parsed result (raises with the child's stderr on failure).

    ``checkout``: run our or the bare side from another checkout of this repository (its own
    ``.venv``), to compare revisions.
    """
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(spec, fh)
        spec_path = fh.name
    env = dict(os.environ)
    if spec.get("threads"):
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(spec["threads"])
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["WANDB_MODE"] = "disabled"
    try:
        proc = subprocess.run(
            command(
                side,
                spec_path,
                reference_python,
                str(checkout / ".venv" / "bin" / "python") if checkout else None,
            ),
            cwd=checkout or ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        os.unlink(spec_path)
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    raise RuntimeError(
        f"{side} side of {spec['workload']} failed (exit {proc.returncode}):\n"
        + proc.stderr[-4000:]
    )


def summarize(runs: list[dict], clock: str) -> dict:
    """Median rates over the repeats, and the highest peak memory."""
    key = "cpu_seconds" if clock == "cpu" else "seconds"
    out = {
        "runs": runs,
        "step_seconds": statistics.median(r[key] / r["epochs"] for r in runs),
        "env_steps_per_s": statistics.median(r["env_steps"] / r[key] for r in runs),
        "tokens_per_s": statistics.median(r["generated_tokens"] / r[key] for r in runs),
        "wall_env_steps_per_s": statistics.median(r["env_steps"] / r["seconds"] for r in runs),
        "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
    }
    if any("peak_gpu_mib" in r for r in runs):
        out["peak_gpu_mib"] = max(r.get("peak_gpu_mib", 0.0) for r in runs)
    return out


def ratios(workload: str, size: str, sides: dict) -> dict:
    """Speed-ups over the reference, the overhead over bare torch, memory, and the targets."""
    out: dict = {}
    ours, bare, ref = sides.get("ours"), sides.get("bare"), sides.get("reference")
    max_overhead, min_speedups = TARGETS.get(workload, (None, {}))
    if ours and ref:
        out["speedup_env_steps"] = ours["env_steps_per_s"] / ref["env_steps_per_s"]
        out["speedup_tokens"] = ours["tokens_per_s"] / ref["tokens_per_s"]
        out["rss_ratio"] = ours["peak_rss_mib"] / ref["peak_rss_mib"]
        out["rss_ok"] = ours["peak_rss_mib"] <= ref["peak_rss_mib"]
        if size in min_speedups:
            out["speedup_target"] = min_speedups[size]
            out["speedup_ok"] = out["speedup_env_steps"] >= min_speedups[size]
    if ours and bare:
        out["overhead_ratio"] = ours["step_seconds"] / bare["step_seconds"]
        if max_overhead is not None:
            out["overhead_target"] = max_overhead
            out["overhead_ok"] = out["overhead_ratio"] <= max_overhead
    # the yardsticks: a plain HF loop and TRL's GRPOTrainer
    for name, targets in (("plainhf", PLAIN_TARGETS), ("trl", TRL_TARGETS)):
        peer = sides.get(name)
        if ours and peer:
            out[f"speedup_over_{name}"] = ours["env_steps_per_s"] / peer["env_steps_per_s"]
            target = targets.get(workload, {}).get(size)
            if target is not None:
                out[f"{name}_target"] = target
                out[f"{name}_ok"] = out[f"speedup_over_{name}"] >= target
    if bare and ref:
        out["bare_over_reference"] = bare["env_steps_per_s"] / ref["env_steps_per_s"]
    return out


def build_spec(
    workload: Workload, size: str, *, device: str, threads: int | None, seed: int
) -> dict:
    """The spec every side of ``workload`` on ``size`` reads (the model is built and cached)."""
    from comlrl.core.testing import tiny_model_dir

    spec = dict(workload.fields)
    spec.update(
        workload=workload.name,
        size=size,
        model_dir=(
            tiny_model_dir(size=size)
            if workload.pretrain_steps is None
            else tiny_model_dir(size=size, pretrain_steps=workload.pretrain_steps)
        ),
        device=device,
        seed=seed,
        threads=threads,
        warmup_epochs=1,
        warmup_items=2,
        epochs=workload.epochs.get(size, 1),
    )
    return spec


def run_workload(
    workload: Workload,
    size: str,
    *,
    sides: tuple[str, ...],
    repeats: int,
    device: str,
    threads: int | None,
    clock: str,
    seed: int,
    reference_python: Path | None,
    timeout: float,
    log=print,
) -> dict:
    """All sides of one workload on one model size; returns the result record."""
    spec = build_spec(workload, size, device=device, threads=threads, seed=seed)
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    started = time.time()
    for rep in range(repeats):
        order = list(sides[rep % len(sides) :] + sides[: rep % len(sides)])
        for side in order:
            result = run_side(side, spec, reference_python, timeout)
            runs[side].append(result)
            key = "cpu_seconds" if clock == "cpu" else "seconds"
            log(
                f"  {workload.name}/{size} {side:9s} run {rep + 1}: "
                f"{result['env_steps'] / result[key]:8.2f} env-steps/s ({clock}), "
                f"{result['env_steps'] / result['seconds']:8.2f} (wall), "
                f"peak RSS {result['peak_rss_mib']:.0f} MiB"
            )
    summary = {side: summarize(r, clock) for side, r in runs.items()}
    return {
        "workload": workload.name,
        "summary": workload.summary,
        "size": size,
        "device": device,
        "clock": clock,
        "repeats": repeats,
        "spec": spec,
        "sides": summary,
        "ratios": ratios(workload.name, size, summary),
        "machine": machine(),
        "elapsed_s": time.time() - started,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def _fmt(values: dict, key: str, fmt: str) -> str:
    return fmt.format(values[key]) if key in values else "–"


def table(records: list[dict]) -> str:
    """A markdown table of the records (rates use each record's clock)."""
    head = (
        "| workload | model | clock | reference env-steps/s | ours | bare torch | plain HF | "
        "TRL (1 agent) | speed-up (env-steps) | speed-up (tokens/s) | overhead ratio | "
        "ours / plain HF | ours / TRL | peak RSS ours / ref (MiB) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for rec in records:
        s, r = rec["sides"], rec["ratios"]
        rate = {side: f"{v['env_steps_per_s']:.1f}" for side, v in s.items()}
        rss = (
            f"{s['ours']['peak_rss_mib']:.0f} / {s['reference']['peak_rss_mib']:.0f}"
            if "ours" in s and "reference" in s
            else "–"
        )
        rows.append(
            f"| {rec['workload']} | {rec['size']} | {rec['clock']} | "
            f"{rate.get('reference', '–')} | {rate.get('ours', '–')} | {rate.get('bare', '–')} | "
            f"{rate.get('plainhf', '–')} | {rate.get('trl', '–')} | "
            f"{_fmt(r, 'speedup_env_steps', '{:.2f}x')} | {_fmt(r, 'speedup_tokens', '{:.2f}x')} | "
            f"{_fmt(r, 'overhead_ratio', '{:.2f}')} | "
            f"{_fmt(r, 'speedup_over_plainhf', '{:.2f}x')} | "
            f"{_fmt(r, 'speedup_over_trl', '{:.2f}x')} | {rss} |"
        )
    return head + "\n".join(rows) + "\n"
