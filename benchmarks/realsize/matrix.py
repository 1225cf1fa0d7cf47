"""The trainer cells of ``python -m benchmarks realsize``: algorithm x agents x memory option.

Each cell trains one step (one prompt, K=2 completions of 32 new tokens, one update) of our
MAGRPO, IAC (value-head critic) or MADPO trainer, or of the reference 1.4.3 trainer, on
random-init agents of a real shape (:mod:`benchmarks.realsize.shapes`), in a fresh process.
The parent watches the child's resident memory: a child that passes :data:`RSS_LIMIT_GB` is
stopped and its cell recorded as not fitting in this machine's 24 GB, and a cell whose weights,
gradients and AdamW state alone exceed the machine's memory is recorded as not fitting without
being run (the arithmetic is in the record).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.learning.catalogue import LORA
from benchmarks.realsize.shapes import SHAPES, model_dir, parameter_count

ROOT = Path(__file__).resolve().parents[2]
ALGORITHMS = ("magrpo", "iac", "madpo")
AGENTS = (1, 2, 4)
OPTIONS = ("fp32", "bf16", "adapters", "sharing", "checkpointing")
# This machine's memory, and where a child is stopped (headroom for the parent and the OS).
MACHINE_GB, RSS_LIMIT_GB = 23.4, 21.5
# The adapters option: the learning table's LoRA (r=8 on every projection), so both measure one setting.
# What each option adds to our side's spec.
OPTION_SPEC = {
    "fp32": {},
    "bf16": {"config": {"bf16": True}},
    "adapters": {"config": {"peft_config": LORA}},
    "sharing": {"model_config": {"share_parameters": True}},
    "checkpointing": {"config": {"gradient_checkpointing": True}},
}
_SAMPLING = {"temperature": 0.6, "top_p": 0.6, "top_k": 50}
WORKLOAD = {
    "magrpo": {"num_generations": 2, "rollout_buffer_size": 1},
    "iac": {"num_generations": 2, "rollout_buffer_size": 2, "use_separate_critic": False},
    "madpo": {"num_generations": 4, "num_candidates": 4, "pairs_per_prompt": 2,
              "rollout_buffer_size": 2},
}  # fmt: skip


SIDE_PREFIX = {"ours": "", "reference": "ref-", "trl": "trl-"}
# What each option sets on TRL's side (GRPOConfig turns gradient checkpointing on by default).
TRL_OPTIONS = {
    "fp32": {},
    "bf16": {"bf16": True},
    "checkpointing": {"gradient_checkpointing": True},
}


@dataclass(frozen=True)
class Cell:
    """One measurement: ``side`` is ``ours``, ``reference`` (comlrl 1.4.3) or ``trl`` (TRL's
    GRPOTrainer, one agent)."""

    shape: str
    algorithm: str
    agents: int
    option: str
    side: str = "ours"

    @property
    def name(self) -> str:
        """The cell's key in the results and its ``--cells`` name."""
        prefix = SIDE_PREFIX[self.side]
        algorithm = "grpo" if self.side == "trl" else self.algorithm
        return f"{prefix}{self.shape}-{algorithm}-n{self.agents}-{self.option}"

    def floor_gb(self) -> float:
        """Weights, gradients and AdamW state the cell cannot do without (fp32: 16 bytes per
        trainable parameter, 4 per frozen one), plus MADPO's frozen reference; a lower bound."""
        p, n = parameter_count(SHAPES[self.shape]), self.agents
        if self.option == "adapters":
            total = 4 * p
        elif self.option == "sharing" and self.algorithm == "madpo":
            total = 16 * p  # MADPO's joint loss steps a shared model's optimizer once
        elif self.option == "sharing":
            total = 8 * p + 8 * p * n  # one model and its gradients, an AdamW state per agent
        else:
            total = 16 * p * n
        if self.algorithm == "madpo" and self.option != "adapters":
            total += 4 * p * (1 if self.option == "sharing" else n)
        return total / 2**30


def cells() -> list[Cell]:
    """Every cell, in table order."""
    out = [
        Cell("qwen05", algo, n, option)
        for algo in ALGORITHMS
        for n in AGENTS
        for option in OPTIONS
        if not (option == "sharing" and n == 1)  # one agent shares with no one
    ]
    out += [Cell("qwen05", algo, n, "fp32", "reference") for algo in ALGORITHMS for n in (1, 2)]
    out.append(Cell("qwen05", "magrpo", 8, "adapters"))  # the one option 8 agents fit in
    out += [Cell("qwen05", "magrpo", 1, option, "trl") for option in TRL_OPTIONS]
    out += [Cell("qwen15", "magrpo", n, o) for n in (1, 4) for o in ("fp32", "adapters")]
    return out


def spec_for(cell: Cell, threads: int) -> dict:
    """The spec the cell's child reads."""
    spec = dict(
        workload=cell.algorithm,
        model_dir=model_dir(cell.shape),
        num_agents=cell.agents,
        num_items=1,
        max_new_tokens=32,
        num_turns=1,
        learning_rate=1e-6,
        logging_steps=1,
        logprob_max_tokens="auto",
        epochs=1,
        warmup_epochs=0,
        device="cpu",
        seed=0,
        threads=threads,
        **_SAMPLING,
        **WORKLOAD[cell.algorithm],
    )
    if cell.side == "ours":
        spec.update(OPTION_SPEC[cell.option])
    elif cell.side == "trl":
        spec.update(TRL_OPTIONS[cell.option])
    return spec


def _command(cell: Cell, spec_path: str, pythons: dict[str, Path]) -> list[str]:
    if cell.side == "ours":
        return [sys.executable, "-m", "benchmarks.realsize.driver", spec_path]
    if cell.side == "trl":
        return [str(pythons["trl"]), str(ROOT / "benchmarks/realsize/trl_driver.py"), spec_path]
    driver = ROOT / "benchmarks" / "portable" / "reference_driver.py"
    return [str(pythons["reference"]), str(driver), spec_path]


def _rss_gb(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 2**20
    return 0.0


def _reference_record(raw: dict) -> dict:
    """The reference driver's result in the cells' terms (decode, and the rest unsplit)."""
    return {
        "status": "measured",
        "peak_rss_gb": raw["peak_rss_mib"] / 1024,
        "train_seconds": raw["seconds"],
        "decode_seconds": raw["generate_s"],
        "generated_tokens": raw["generated_tokens"],
        "env_steps": raw["env_steps"],
        "environment": raw.get("environment"),
    }


def run_cell(cell: Cell, threads: int, pythons: dict[str, Path], timeout: float) -> dict:
    """Measure ``cell`` in a watched child process; the record says how it ended.
    ``pythons`` maps the ``reference`` and ``trl`` sides to their venvs' interpreters."""
    from benchmarks.portable.measure import RESULT_PREFIX

    base = {"cell": cell.name, "floor_gb": round(cell.floor_gb(), 2)}
    if cell.floor_gb() > MACHINE_GB:
        return base | {
            "status": "does not fit",
            "reason": f"weights, gradients and AdamW state alone need {cell.floor_gb():.1f} GB",
        }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(spec_for(cell, threads), fh)
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", WANDB_MODE="disabled")
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(
            _command(cell, fh.name, pythons), cwd=ROOT, env=env, stdout=out, stderr=err
        )
        watched_peak, start, stopped = 0.0, time.monotonic(), None
        while child.poll() is None:
            watched_peak = max(watched_peak, _rss_gb(child.pid))
            if watched_peak > RSS_LIMIT_GB:
                stopped = f"resident memory passed {RSS_LIMIT_GB} GB (machine: 24 GB)"
            elif time.monotonic() - start > timeout:
                stopped = f"ran past {timeout:.0f} s"
            if stopped:
                child.kill()
                child.wait()
                break
            time.sleep(0.2)
        os.unlink(fh.name)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if stopped:
        status = "does not fit" if "memory" in stopped else "timed out"
        return base | {"status": status, "reason": stopped}
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            raw = json.loads(line[len(RESULT_PREFIX) :])
            record = _reference_record(raw) if cell.side == "reference" else raw
            return base | record | {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ")}
    reason = stderr[-2000:].strip()
    if child.returncode < 0:  # killed without a word: the kernel's OOM killer, most often
        reason = f"{reason}\nthe child was killed by signal {-child.returncode}".strip()
    return base | {"status": "failed", "reason": reason or f"exit status {child.returncode}"}
