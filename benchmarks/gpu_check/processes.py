"""Child processes of the GPU check, each under a deadline, read back line by line.

A side (or the path checks) runs in its own process and prints one tagged JSON line per result
as it goes; when the deadline stops it, the lines already printed still count. The child gets a
session of its own, so stopping it stops everything it started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PORTABLE = ROOT / "benchmarks" / "portable"

# The child that is running now, so a SIGTERM to the check can stop it before writing results.
_current: subprocess.Popen | None = None


def child_env(threads: int | None, keep_pythonpath: bool = True) -> dict:
    """The environment of a child: offline, no W&B, quiet tokenizers, optional thread caps.

    The reference runs without ``PYTHONPATH``, which could otherwise put our ``comlrl`` ahead of
    the reference venv's own.
    """
    env = dict(os.environ)
    env.update(
        TOKENIZERS_PARALLELISM="false",
        WANDB_MODE="disabled",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONUNBUFFERED="1",
    )
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    if not keep_pythonpath:
        env.pop("PYTHONPATH", None)
    return env


def stop_current() -> None:
    """Kill the running child and everything it started (no-op when none runs)."""
    proc = _current
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def run_tagged(
    command: list[str], payload, prefix: str, timeout: float, env: dict
) -> tuple[list[dict], dict]:
    """Run ``command PAYLOAD.json`` for at most ``timeout`` seconds.

    Returns the records of every ``prefix`` line it printed and a status: ``exit`` code,
    ``timed_out``, ``seconds`` and the ``stderr_tail``.
    """
    global _current
    with tempfile.TemporaryDirectory(prefix="comlrl-gpu-proc-") as tmp:
        spec_path = os.path.join(tmp, "spec.json")
        with open(spec_path, "w") as fh:
            json.dump(payload, fh)
        out_path, err_path = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        started = time.perf_counter()
        timed_out = False
        with open(out_path, "w") as out, open(err_path, "w") as err:
            _current = subprocess.Popen(
                [*command, spec_path],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                code = _current.wait(timeout=max(1.0, timeout))
            except subprocess.TimeoutExpired:
                timed_out = True
                stop_current()
                code = _current.returncode
            finally:
                _current = None
        records = []
        with open(out_path) as fh:
            for line in fh:
                if line.startswith(prefix):
                    records.append(json.loads(line[len(prefix) :]))
        with open(err_path) as fh:
            stderr_tail = fh.read()[-3000:]
    status = {
        "exit": code,
        "timed_out": timed_out,
        "seconds": round(time.perf_counter() - started, 1),
        "stderr_tail": stderr_tail if (code != 0 or timed_out) else "",
    }
    return records, status
