"""Memory of the loss forward+backward at real shapes: ``python -m benchmarks realsize --cells ...``.

Each cell runs in a fresh subprocess and reports its peak resident memory above the
*model-and-optimizer floor*: the process is measured after the model, its AdamW optimizer (the
trainers' own, :func:`comlrl.core.training.optim.build_adamw`) and
one warm-up step (so gradients and optimizer state exist), its peak counter is reset (Linux
``/proc/self/clear_refs``), and the cell's work runs; ``peak_above_floor`` is the new peak minus
the floor. Nothing is downloaded: models are random-init from a transformers config.

Cells:

- ``scoring``: the loss forward+backward of a MAGRPO update (4 prompts x K=8 completions of 128
  tokens, temperature 0.6) for a tiny-body model with a 151,936-token vocabulary, with the
  log-prob engine as it is by default (``after``: chunked head, ``logprob_max_tokens="auto"``)
  and with its chunking and budget turned off (``before``: the whole ``[rows, tokens, vocab]``
  logits in one forward, as the engine computed them before either existed), and
  ``autograd``: the chunked head and budget, but the vocabulary-sized weights' gradients left to
  autograd (a second full-size buffer for the head's and the embedding's gradient, as before
  :mod:`comlrl.core.logprobs.vocab_grads`).
- ``qwen05-scoring``: the same update at the Qwen2.5-0.5B shape (494M parameters): ``after``
  (the defaults), ``checkpointed`` (the defaults with ``gradient_checkpointing``),
  ``autograd`` (the defaults without the in-place vocabulary gradients), ``uncapped`` (chunked
  head, no token budget: the body's activations of all 32 rows at once)
  and, when ``--cells`` asks for it, ``before``. Slow on CPU (minutes per cell).

    uv run --frozen python -m benchmarks realsize                    # the tiny-body cells
    uv run --frozen python -m benchmarks realsize --cells qwen05-scoring
    uv run --frozen python -m benchmarks realsize --table            # the saved results

Results are written to ``benchmarks/results/realsize.json`` (one entry per cell, merged with
earlier runs); cells not run are reported as not measured, never estimated.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.realsize.shapes import QWEN25_05B, TINY_BODY

RESULTS = Path(__file__).resolve().parent.parent / "results" / "realsize.json"

PROMPTS, K, COMPLETION_TOKENS, PROMPT_TOKENS, TEMPERATURE = 4, 8, 128, 32, 0.6

# cell -> (shape, head as before the chunked head or after it, the token budget, whether the
# agent recomputes its activations in the backward: gradient_checkpointing)
CELLS = {
    "scoring-before": (TINY_BODY, "before", None, False),
    "scoring-after": (TINY_BODY, "after", "auto", False),
    "scoring-autograd": (TINY_BODY, "autograd", "auto", False),
    "qwen05-scoring-before": (QWEN25_05B, "before", None, False),
    "qwen05-scoring-uncapped": (QWEN25_05B, "after", None, False),
    "qwen05-scoring-after": (QWEN25_05B, "after", "auto", False),
    "qwen05-scoring-autograd": (QWEN25_05B, "autograd", "auto", False),
    "qwen05-scoring-checkpointed": (QWEN25_05B, "after", "auto", True),
}
DEFAULT_CELLS = ("scoring-before", "scoring-autograd", "scoring-after")
# what ``--cells qwen05-scoring`` runs (``before`` only when named: it needs ~20 GB)
QWEN05_CELLS = (
    "qwen05-scoring-uncapped",
    "qwen05-scoring-autograd",
    "qwen05-scoring-after",
    "qwen05-scoring-checkpointed",
)


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _unchunked(kernels) -> None:
    """The engine before bounded memory: the model's whole logits, one log-softmax over them."""
    kernels.head_split = lambda model: None
    kernels._logits_chunk = lambda model: 1 << 62


def _update(model, opt, prompts, comps, pad_id: int, budget) -> float:
    """One MAGRPO-style update: score with gradients (forwards of at most ``budget`` tokens,
    ``logprob_max_tokens``), a policy-gradient loss, backward per forward, step."""
    import torch

    from comlrl.core.logprobs import token_logprobs_parts

    opt.zero_grad(set_to_none=True)
    adv = torch.linspace(-1.0, 1.0, len(prompts))
    total = 0.0
    parts = token_logprobs_parts(
        model,
        prompts,
        comps,
        pad_id=pad_id,
        max_tokens=budget,
        dedupe=False,
        temperature=TEMPERATURE,
    )
    for idx, lp in parts:
        loss = -(adv[idx] * lp.sequence_sum() / COMPLETION_TOKENS).mean()
        loss.backward()
        total += loss.item()
    opt.step()
    return total


def run_cell(name: str) -> dict:
    """Measure one cell in this process (called in a fresh subprocess)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from comlrl.core.logprobs import kernels, vocab_grads
    from comlrl.core.logprobs.budget import token_budget
    from comlrl.core.training.optim import build_adamw

    shape, mode, budget, checkpointed = CELLS[name]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Qwen2Config(**shape, eos_token_id=0, pad_token_id=0))
    model.train()
    if checkpointed:
        model.config.use_cache = False
        model.gradient_checkpointing_enable()
    if mode == "before":
        _unchunked(kernels)
    if mode == "autograd":
        vocab_grads.MIN_ELEMENTS = 1 << 62
    opt = build_adamw(model.parameters(), lr=1e-6)
    vocab = shape["vocab_size"]
    gen = torch.Generator().manual_seed(0)
    # K completions per prompt, as a MAGRPO node's samples share their prompt.
    prompts = [
        prompt
        for prompt in (
            torch.randint(1, vocab, (PROMPT_TOKENS,), generator=gen).tolist()
            for _ in range(PROMPTS)
        )
        for _ in range(K)
    ]
    comps = [torch.randint(1, vocab, (COMPLETION_TOKENS,), generator=gen).tolist() for _ in prompts]
    _update(model, opt, prompts[:1], [comps[0][:1]], 0, budget)  # gradients and AdamW state exist
    floor = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    start = time.perf_counter()
    _update(model, opt, prompts, comps, 0, budget)
    seconds = time.perf_counter() - start
    peak = _status_kb("VmHWM")
    params = sum(p.numel() for p in model.parameters())
    return {
        "cell": name,
        "mode": mode,
        "logprob_max_tokens": budget,
        "gradient_checkpointing": checkpointed,
        "token_budget": token_budget(budget, model),
        "parameters": params,
        "vocab": vocab,
        "rows": len(prompts),
        "completion_tokens": COMPLETION_TOKENS,
        "floor_gb": floor / 2**20,
        "peak_gb": peak / 2**20,
        "peak_above_floor_gb": (peak - floor) / 2**20,
        "update_seconds": seconds,
        "threads": torch.get_num_threads(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _saved() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def table(results: dict) -> str:
    """A markdown table of every cell, measured or not."""
    lines = [
        "| cell | parameters | vocab | tokens per forward | floor (GB) | peak above floor (GB) "
        "| update (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in CELLS:
        r = results.get(name)
        if r is None:
            lines.append(f"| {name} | | | | not measured | not measured | not measured |")
            continue
        cap = r.get("token_budget")
        lines.append(
            f"| {name} | {r['parameters'] / 1e6:.1f}M | {r['vocab']} | "
            f"{'no cap' if cap is None else cap} | {r['floor_gb']:.2f} | "
            f"{r['peak_above_floor_gb']:.2f} | {r['update_seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def run(names, threads: int, results: dict) -> None:
    """Measure each scoring cell in a fresh subprocess; record it in ``results``."""
    for name in names:
        print(f"[realsize] {name} ...", flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks", "realsize", "--cell-child", name]
            + ["--threads", str(threads)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"[realsize] cell {name} failed (exit {done.returncode})")
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
        results[name]["command"] = "python -m benchmarks realsize --cells " + name
