"""The GPU check's vLLM phase: the backend conformance suite on the real engine, then decode
speed of the HF backend (direct step) against the vLLM backend on the check's two agents.

Usage: ``python -m benchmarks.gpu_check.vllm_phase SPEC.json``; prints one tagged line per
result (the path checks' format, ``GPU_CHECK {...}``):

- ``vllm_conformance``: ``pytest tests/core/rollout/test_vllm_gpu_conformance.py`` with the check's
  first agent as the model (``COMLRL_VLLM_TEST_MODEL``).
- ``vllm_decode_speed``: N = 2 agents, K = 8 samples of each of ``prompts`` prompts, up to
  ``max_new_tokens`` tokens; generated tokens per wall second of each backend after one
  warm-up call, and their ratio.

Without vLLM, or without a CUDA device, both are ``not_applicable`` with the reason (the CPU
form of the check and a machine without the extra take that path in a second).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from benchmarks.gpu_check.paths import emit_check

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("vllm_conformance", "vllm_decode_speed")
SPEED_SHAPE = {
    "0.5b": dict(prompts=16, k=8, max_new_tokens=128),
    "tiny": dict(prompts=4, k=8, max_new_tokens=8),
}


def unavailable_reason(device: str) -> str | None:
    """Why the phase cannot run here (None: it can)."""
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed (pip install 'comlrl-core[vllm]', docs/rollout_backends.md)"
    if not device.startswith("cuda"):
        return f"vLLM needs a CUDA device; the check runs on {device}"
    return None


def run_conformance(spec: dict) -> None:
    """The conformance suite on the real engine, in a child pytest."""
    if importlib.util.find_spec("pytest") is None:
        emit_check(NAMES[0], "not_applicable", "pytest is not installed (pip install pytest)")
        return
    env = dict(os.environ, COMLRL_VLLM_TEST_MODEL=spec["agent_dirs"][0])
    cmd = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "-p", "no:cacheprovider"]
    cmd.append("tests/core/rollout/test_vllm_gpu_conformance.py")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
    summary = tail[-1] if tail else ""
    if proc.returncode == 0 and "skipped" in summary and "passed" not in summary:
        emit_check(NAMES[0], "not_applicable", summary)
    elif proc.returncode == 0:
        emit_check(NAMES[0], "passed", None, summary=summary)
    else:
        emit_check(NAMES[0], "failed", "\n".join(tail))


def decode_speed(spec: dict) -> None:
    """HF direct-step backend vs vLLM backend, tokens per wall second, same requests."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from comlrl.core.rollout.backends import BackendInputs
    from comlrl.core.rollout.backends.hf import HFBackend
    from comlrl.core.rollout.backends.vllm.backend import build_vllm_backend
    from comlrl.core.rollout.generation import SamplingParams, tokenize_prompts
    from comlrl.core.testing import prompts

    shape = SPEED_SHAPE[spec["size"]]
    dtype = getattr(torch, spec["dtype"])
    dirs = spec["agent_dirs"][:2]
    toks = [AutoTokenizer.from_pretrained(d) for d in dirs]
    models = [
        AutoModelForCausalLM.from_pretrained(d, dtype=dtype).to(spec["device"]).eval() for d in dirs
    ]
    params = SamplingParams(max_new_tokens=shape["max_new_tokens"], temperature=1.0, top_p=1.0)
    ids = [tokenize_prompts(t, prompts(shape["prompts"])) for t in toks]
    inputs = BackendInputs(
        models,
        toks,
        SimpleNamespace(
            rollout_backend_options={"gpu_memory_utilization": 0.25, "dtype": spec["dtype"]},
            seed=spec.get("seed", 0),
        ),
    )
    backends = {
        "hf_direct": HFBackend(models, toks, fast_path="direct"),
        "vllm": build_vllm_backend(inputs),
    }
    rates = {}
    for name, backend in backends.items():

        def once(backend=backend):
            n = 0
            for agent in range(len(models)):
                out = backend.generate_ids(agent, ids[agent], shape["k"], params)
                n += sum(len(c) for r in out for c in r.completion_ids)
            torch.cuda.synchronize()
            return n

        once()  # warm-up (CUDA graphs, compilation, allocator)
        start = time.perf_counter()
        tokens = once()
        seconds = time.perf_counter() - start
        rates[name] = {"tokens": tokens, "seconds": round(seconds, 3)}
        rates[name]["tokens_per_s"] = round(tokens / seconds, 1)
    ratio = rates["vllm"]["tokens_per_s"] / rates["hf_direct"]["tokens_per_s"]
    emit_check(
        NAMES[1],
        "passed",
        None,
        agents=len(models),
        k=shape["k"],
        prompts=shape["prompts"],
        max_new_tokens=shape["max_new_tokens"],
        hf_direct_tokens_per_s=rates["hf_direct"]["tokens_per_s"],
        vllm_tokens_per_s=rates["vllm"]["tokens_per_s"],
        vllm_over_hf=round(ratio, 2),
    )


def main() -> None:
    with open(sys.argv[1]) as fh:
        spec = json.load(fh)
    reason = unavailable_reason(spec["device"])
    if reason is not None:
        for name in NAMES:
            emit_check(name, "not_applicable", reason)
        return
    for name, step in zip(NAMES, (run_conformance, decode_speed)):
        try:
            step(spec)
        except Exception as exc:  # one failure is reported; the other result still runs
            import traceback

            emit_check(name, "failed", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")


if __name__ == "__main__":
    main()
