"""The GPU check: one command, one time budget, one JSON file, the table printed last.

    python -m benchmarks gpu                                  # on a GPU: the 0.5B pair, bf16
    python -m benchmarks gpu --device cpu --size tiny         # the same code on a CPU, seconds

Phases, each in its own process under the global deadline: build the two agents (random
weights, saved once), our side over every workload, the device path checks, the vLLM phase
(the rollout-backend conformance suite on the real engine and HF-vs-vLLM decode speed; "not
applicable" with the reason without vLLM or CUDA), the bare-torch bound, and the reference
(when its venv is there). The JSON is rewritten after every phase, so
a run stopped by the budget (or a SIGTERM) leaves everything finished so far. See
docs/performance.md, "GPU check".
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.gpu_check import processes, report
from benchmarks.gpu_check.models import DTYPES, SIZES, build_agent_dirs, check_dtype, check_size
from benchmarks.gpu_check.paths import CHECK_PREFIX
from benchmarks.gpu_check.shapes import NAMES, WORKLOADS
from benchmarks.portable.measure import RESULT_PREFIX

RESULTS = Path(__file__).resolve().parents[1] / "results"
PHASES = ("ours", "checks", "vllm", "bare", "reference")
# Share of the budget each phase is guaranteed; time a phase leaves unused goes to later ones.
GUARANTEE = {"ours": 0.15, "checks": 0.2, "vllm": 0.15, "bare": 0.15, "reference": 0.3}


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m benchmarks gpu``."""
    p = argparse.ArgumentParser(prog="python -m benchmarks gpu", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="auto", help="auto (cuda when present), cuda, cuda:1, cpu")
    p.add_argument("--size", default="0.5b", help=f"agent pair: {', '.join(SIZES)}")
    p.add_argument("--dtype", default="bfloat16", help=f"weights: {', '.join(DTYPES)}")
    p.add_argument("--budget", type=float, default=480.0, help="seconds for the whole check")
    p.add_argument("--workloads", nargs="+", default=list(NAMES), help="subset of the workloads")
    p.add_argument("--sides", nargs="+", default=["ours", "bare", "reference"])
    p.add_argument("--no-checks", action="store_true", help="skip the device path checks")
    p.add_argument("--no-vllm", action="store_true", help="skip the vLLM phase")
    p.add_argument(
        "--reference-python",
        default="auto",
        help="the reference venv's python; auto: benchmarks/.venv-ref if it exists; none: skip",
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads (CPU default: 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="JSON file (default: results/)")
    return p


def parse(argv) -> argparse.Namespace:
    """Parsed arguments, every choice checked before anything is built."""
    from benchmarks.portable.measure import resolve_device

    args = parser().parse_args(argv)
    check_size(args.size)
    check_dtype(args.dtype)
    if args.budget <= 0:
        raise ValueError(f"budget must be a positive number of seconds, got {args.budget}.")
    unknown = [w for w in args.workloads if w not in NAMES]
    if unknown:
        raise ValueError(f"workloads {unknown} unknown; valid: {list(NAMES)}.")
    bad_sides = [s for s in args.sides if s not in report.SIDE_ORDER]
    if bad_sides:
        raise ValueError(f"sides {bad_sides} unknown; valid: {list(report.SIDE_ORDER)}.")
    args.device = resolve_device(args.device)
    if args.out is None:
        args.out = RESULTS / f"gpu-check-{args.size}-{args.device.split(':')[0]}.json"
    return args


def find_reference(choice: str) -> dict:
    """Where the reference's python is, or why there is none (never installs anything)."""
    if choice == "none":
        return {"available": False, "python": None, "reason": "--reference-python none"}
    if choice == "auto":
        from benchmarks.refvenv import VENV_DIR, is_complete

        python = VENV_DIR / "bin" / "python"
        if not is_complete(VENV_DIR):
            return {
                "available": False,
                "python": None,
                "reason": f"no reference venv at {VENV_DIR} (benchmarks/gpu_check.sh builds one "
                "when it can; pass --reference-python PATH for another)",
            }
        return {"available": True, "python": str(python), "reason": None}
    if not Path(choice).exists():
        return {"available": False, "python": None, "reason": f"{choice} does not exist"}
    return {"available": True, "python": choice, "reason": None}


def installed_families() -> list[str]:
    """The workloads whose algorithm family is installed here."""
    from comlrl.core.plugins import available_algorithms

    have = set(available_algorithms())
    return [w for w in NAMES if w in have]


class Check:
    """State of one run of the check: the record, the deadline, the JSON file."""

    def __init__(self, args, argv):
        self.args = args
        self.started = time.perf_counter()
        self.deadline = self.started + args.budget
        self.guarantee = dict(GUARANTEE)
        from benchmarks.gpu_check.vllm_phase import unavailable_reason

        if unavailable_reason(args.device) is not None:
            # The phase only reports why it cannot run: it owes the later phases nothing.
            self.guarantee["vllm"] = 0.01
        self.clock = "cpu" if args.device == "cpu" else "wall"
        self.threads = (
            args.threads if args.threads is not None else (1 if self.clock == "cpu" else None)
        )
        self.record = {
            "command": "python -m benchmarks gpu " + " ".join(argv),
            "device": args.device,
            "size": args.size,
            "dtype": args.dtype,
            "clock": self.clock,
            "budget_s": args.budget,
            "complete": False,
            "models": {},
            "reference": {},
            "workloads": {},
            "checks": {},
            "vllm": {},
            "phases": {},
        }

    def remaining(self) -> float:
        """Seconds left until the global deadline."""
        return self.deadline - time.perf_counter()

    def phase_timeout(self, phase: str, planned: list[str]) -> float:
        """This phase's time: what is left, less what the later planned phases are owed."""
        later = planned[planned.index(phase) + 1 :]
        owed = sum(self.guarantee[p] for p in later) * self.args.budget
        return max(
            self.remaining() - owed,
            min(self.remaining(), self.guarantee[phase] * self.args.budget),
        )

    def write(self) -> None:
        """Rewrite the JSON file with everything recorded so far."""
        from benchmarks.runner import machine

        self.record["elapsed_s"] = round(time.perf_counter() - self.started, 1)
        self.record["machine"] = machine()
        self.args.out.parent.mkdir(parents=True, exist_ok=True)
        self.args.out.write_text(json.dumps(self.record, indent=2, default=str) + "\n")

    def specs(self, dirs: list[str], names: list[str]) -> list[dict]:
        """One spec per workload, every side's the same."""
        out = []
        for name in names:
            w = WORKLOADS[self.args.size][name]
            spec = dict(w.fields)
            spec.update(
                workload=name,
                size=self.args.size,
                model_dir=dirs[0],
                agent_dirs=dirs,
                critic_dir=dirs[1],
                dtype=self.args.dtype,
                device=self.args.device,
                seed=self.args.seed,
                threads=self.threads,
                warmup_epochs=1,
                warmup_items=1,
                epochs=w.epochs[self.args.size],
            )
            out.append(spec)
        return out

    def run_side(self, side: str, specs: list[dict], timeout: float) -> None:
        """One side over every workload in one process; record each result, failure or cut."""
        if side == "reference":
            ref = self.record["reference"]
            command = [ref["python"], str(processes.PORTABLE / "reference_driver.py")]
            env = processes.child_env(self.threads, keep_pythonpath=False)
        else:
            command = [sys.executable, "-m", f"benchmarks.{side}"]
            env = processes.child_env(self.threads)
        print(f"[gpu-check] {side}: {len(specs)} workloads, at most {timeout:.0f} s", flush=True)
        results, status = processes.run_tagged(command, specs, RESULT_PREFIX, timeout, env)
        self.record["phases"][side] = status
        by_name = {r["workload"]: r for r in results}
        for spec in specs:
            name = spec["workload"]
            result = by_name.get(name)
            if result is None:
                why = "the time budget ran out" if status["timed_out"] else status["stderr_tail"]
                result = {"status": "not_run", "reason": why}
            elif "error" in result:
                result = {"status": "failed", "reason": result["error"]}
            self.record["workloads"][name]["sides"][side] = result
            self._summarize(name)

    def _summarize(self, name: str) -> None:
        w = self.record["workloads"][name]
        w.update(report.summarize_workload(name, self.args.size, w["sides"], self.clock))

    def _tagged_phase(self, phase: str, module: str, payload: dict, timeout: float) -> dict:
        """Run ``python -m module`` on ``payload``; record its status under ``phases`` and
        each tagged result it printed under ``record[phase]``. Returns the status."""
        found, status = processes.run_tagged(
            [sys.executable, "-m", module],
            payload,
            CHECK_PREFIX,
            timeout,
            processes.child_env(self.threads),
        )
        self.record["phases"][phase] = status
        for c in found:
            self.record[phase][c.pop("name")] = c
        return status

    def run_checks(self, dirs: list[str], families: list[str], timeout: float) -> None:
        """The device path checks in one process; record each check it finished."""
        payload = dict(
            device=self.args.device,
            dtype=self.args.dtype,
            size=self.args.size,
            model_dir=dirs[0],
            agent_dirs=dirs,
            critic_dir=dirs[1],
            families=families,
            seed=self.args.seed,
            threads=self.threads,
        )
        print(f"[gpu-check] path checks, at most {timeout:.0f} s", flush=True)
        status = self._tagged_phase("checks", "benchmarks.gpu_check.paths", payload, timeout)
        if status["exit"] != 0 or status["timed_out"]:
            why = "the time budget ran out" if status["timed_out"] else status["stderr_tail"]
            self.record["checks"]["(unfinished)"] = {"status": "not_run", "reason": why}

    def run_vllm(self, dirs: list[str], timeout: float) -> None:
        """The vLLM phase in one process (benchmarks/gpu_check/vllm_phase.py)."""
        from benchmarks.gpu_check.vllm_phase import NAMES as VLLM_NAMES

        payload = dict(
            device=self.args.device,
            dtype=self.args.dtype,
            size=self.args.size,
            agent_dirs=dirs,
            seed=self.args.seed,
        )
        print(f"[gpu-check] vLLM phase, at most {timeout:.0f} s", flush=True)
        status = self._tagged_phase("vllm", "benchmarks.gpu_check.vllm_phase", payload, timeout)
        for name in VLLM_NAMES:
            if name not in self.record["vllm"]:
                why = "the time budget ran out" if status["timed_out"] else status["stderr_tail"]
                self.record["vllm"][name] = {"status": "not_run", "reason": why}
        for name, c in self.record["vllm"].items():
            if c["status"] == "not_applicable":
                print(f"[gpu-check] {name}: skipped ({c['reason']})", flush=True)


def main(argv=None) -> int:
    """Run the check; exit status 0 when every phase finished and everything passed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    sys.stdout.reconfigure(line_buffering=True)  # progress shows up in logs as it happens
    try:
        args = parse(argv)
    except ValueError as exc:
        print(f"[gpu-check] {exc}", file=sys.stderr)
        return 2
    run = Check(args, argv)
    families = [w for w in args.workloads if w in installed_families()]
    ref = find_reference(args.reference_python) if "reference" in args.sides else None
    run.record["reference"] = ref or {"available": False, "reason": "not among --sides"}
    if ref is not None and not ref["available"]:
        print(f"[gpu-check] reference: NOT AVAILABLE ({ref['reason']}); its column is skipped")
    sides = [s for s in ("ours", "bare") if s in args.sides]
    if ref is not None and ref["available"]:
        sides.append("reference")
    optional = {"checks": not args.no_checks, "vllm": not args.no_vllm}
    planned = [p for p in PHASES if p in sides or optional.get(p, False)]
    for name in args.workloads:
        state = {} if name in families else {"status": "skipped", "reason": "family not installed"}
        run.record["workloads"][name] = {
            "summary": WORKLOADS[args.size][name].summary,
            "sides": {s: dict(state) for s in sides} if state else {},
        }
    if "reference" in args.sides and not (ref and ref["available"]):
        for name in args.workloads:
            reason = run.record["reference"]["reason"]
            run.record["workloads"][name]["sides"]["reference"] = {
                "status": "skipped",
                "reason": reason,
            }

    def on_term(signum, frame):
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    models_root = tempfile.mkdtemp(prefix="comlrl-gpu-models-")
    try:
        print(f"[gpu-check] building the {args.size} agents in {args.dtype} on {args.device}")
        info = build_agent_dirs(models_root, args.size, args.dtype, args.device, args.seed)
        run.record["models"] = {"parameters": info["parameters"], "shapes": info["shapes"]}
        run.write()
        finished = True
        for phase in planned:
            if run.remaining() <= 5:
                finished = False
                break
            timeout = run.phase_timeout(phase, planned)
            if phase == "checks":
                run.run_checks(info["dirs"], families, timeout)
            elif phase == "vllm":
                run.run_vllm(info["dirs"], timeout)
            elif families:
                run.run_side(phase, run.specs(info["dirs"], families), timeout)
            finished = finished and not run.record["phases"].get(phase, {}).get("timed_out")
            run.write()
        run.record["complete"] = finished
    finally:
        processes.stop_current()
        shutil.rmtree(models_root, ignore_errors=True)
        ok, bad = report.verdict(run.record)
        run.record["passed"] = ok
        run.record["problems"] = bad
        run.write()
        print_tables(run.record, args.out)
    return 0 if run.record["passed"] and run.record["complete"] else 1


def print_tables(record: dict, path: Path) -> None:
    """The closing output: where the JSON is, the problems, the checks, the workload table."""
    print()
    print(
        f"GPU check: {record['size']} agents {record['models'].get('parameters')} parameters, "
        f"{record['dtype']} on {record['device']}, clock {record['clock']}, "
        f"{record.get('elapsed_s')} s of {record['budget_s']:.0f}; JSON: {path}"
    )
    ref = record["reference"]
    if not ref.get("available"):
        print(f"reference: not available ({ref.get('reason')})")
    problems = report.problems_table(record)
    if problems:
        print(problems, end="")
    print()
    print(report.checks_table(record))
    if record.get("vllm"):
        print(report.checks_table({"checks": record["vllm"]}))
    print(report.workload_table(record), end="")
