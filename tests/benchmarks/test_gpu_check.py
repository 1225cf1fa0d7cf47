"""The GPU check's CPU form (``python -m benchmarks gpu --device cpu --size tiny``) runs every
workload and every device path check, and its parts behave: the widened tokenizer, the model
shapes, argument errors, the deadline on child processes and per-workload error reports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.gpu_check import models, processes, report, run
from benchmarks.gpu_check.shapes import NAMES
from benchmarks.portable.protocol import run_specs

ROOT = Path(__file__).resolve().parents[2]
PATH_CHECKS = ("mp_one_device", "mp_two_devices", "gradient_checkpointing", "checkpoint_resume")

# One worker runs the whole module, so the command runs once.
pytestmark = pytest.mark.xdist_group("test_gpu_check")


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check") / "check.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "gpu",
            "--device",
            "cpu",
            "--size",
            "tiny",
            "--sides",
            "ours",
            "bare",
            "reference",
            "--reference-python",
            "none",
            "--budget",
            "900",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert out.exists(), proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


def test_cpu_run_finishes_and_passes(cpu_run):
    proc, record = cpu_run
    assert proc.returncode == 0, record.get("problems") or proc.stderr[-3000:]
    assert record["complete"] and record["passed"] and record["problems"] == []
    assert (record["device"], record["size"], record["dtype"]) == ("cpu", "tiny", "bfloat16")
    assert record["models"]["parameters"][0] > record["models"]["parameters"][1] > 0


def test_every_workload_has_ours_and_bare_numbers(cpu_run):
    _, record = cpu_run
    assert list(record["workloads"]) == list(NAMES)
    for name, w in record["workloads"].items():
        for side in ("ours", "bare"):
            result = w["sides"][side]
            assert result["env_steps"] > 0 and result["generated_tokens"] > 0, (name, side)
            assert w["rates"][side]["tokens_per_s"] > 0
        assert w["ratios"]["overhead_ratio"] > 0


def test_missing_reference_is_reported_and_only_its_column_skipped(cpu_run):
    proc, record = cpu_run
    assert record["reference"]["available"] is False
    assert "reference: NOT AVAILABLE" in proc.stdout
    for w in record["workloads"].values():
        assert w["sides"]["reference"]["status"] == "skipped"
        assert w["sides"]["reference"]["reason"]
        assert "speedup_env_steps" not in w["ratios"]


def test_every_path_check_passed_or_says_why_not(cpu_run):
    _, record = cpu_run
    checks = record["checks"]
    expected = [f"bfloat16_training:{f}" for f in NAMES] + [f"save_model:{f}" for f in NAMES]
    assert set(checks) == set(expected) | set(PATH_CHECKS)
    for name, c in checks.items():
        assert c["status"] in ("passed", "not_applicable"), (name, c["reason"])
        if c["status"] == "not_applicable":
            assert c["reason"], name
    assert checks["mp_two_devices"]["status"] == "not_applicable"
    assert checks["checkpoint_resume"]["status"] == "passed"
    assert checks["gradient_checkpointing"]["detail"]["enabled_by"]
    assert checks["bfloat16_training:magrpo"]["detail"]["losses_logged"] > 0


def test_the_vllm_phase_says_in_one_line_why_it_did_not_run(cpu_run):
    proc, record = cpu_run
    assert set(record["vllm"]) == {"vllm_conformance", "vllm_decode_speed"}
    for name, c in record["vllm"].items():
        assert c["status"] == "not_applicable" and c["reason"], name
        assert f"[gpu-check] {name}: skipped (" in proc.stdout


def test_the_table_is_printed_last(cpu_run):
    proc, _ = cpu_run
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith("| madpo |")
    assert any(line.startswith("| workload | env-steps/s") for line in lines[-6:])


def test_widened_tokenizer_decodes_every_id_and_encodes_prompts_as_before():
    from comlrl.core.testing import build_tokenizer

    tok = models.widened_tokenizer(400)
    assert len(tok) == 400
    assert all(tok.decode([i]) for i in range(1, 400))
    prompt = "Write a story about a cat."
    assert tok(prompt)["input_ids"] == build_tokenizer()(prompt)["input_ids"]
    with pytest.raises(ValueError, match="vocab_size"):
        models.widened_tokenizer(10)


def test_the_05b_agent_has_the_published_qwen2_5_shape():
    import torch
    from transformers import AutoModelForCausalLM

    tok = models.widened_tokenizer(models.SHAPES["tiny"]["vocab_size"])
    counts = []
    for agent in (0, 1):
        with torch.device("meta"):
            m = AutoModelForCausalLM.from_config(models.build_config("0.5b", agent, tok))
        counts.append(sum(p.numel() for p in m.parameters()))
    assert counts[0] == 494_032_768  # Qwen2.5-0.5B, tied embeddings
    assert counts[1] < counts[0] / 3


@pytest.mark.parametrize(
    "argv, field",
    [
        (["--size", "7b"], "size"),
        (["--dtype", "int8"], "dtype"),
        (["--workloads", "ppo"], "workloads"),
        (["--sides", "theirs"], "sides"),
        (["--budget", "0"], "budget"),
    ],
)
def test_bad_arguments_name_the_field(argv, field):
    with pytest.raises(ValueError, match=field):
        run.parse(["--device", "cpu", *argv])


def test_a_child_stopped_by_the_deadline_keeps_what_it_printed(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            print("TAG {\\"n\\": 1}", flush=True)
            time.sleep(120)
            print("TAG {\\"n\\": 2}", flush=True)
            """
        )
    )
    records, status = processes.run_tagged(
        [sys.executable, str(script)], {}, "TAG ", 3.0, processes.child_env(None)
    )
    assert records == [{"n": 1}]
    assert status["timed_out"] and status["exit"] != 0


def test_a_failing_workload_is_reported_and_the_rest_still_run():
    emitted = []

    def run_one(spec):
        if spec["workload"] == "iac":
            raise RuntimeError("out of memory")
        return {"env_steps": 1}

    specs = [{"workload": w, "device": "cpu"} for w in ("magrpo", "iac", "maac")]
    run_specs(specs, run_one, emitted.append)
    assert [r["workload"] for r in emitted] == ["magrpo", "iac", "maac"]
    assert "out of memory" in emitted[1]["error"] and "env_steps" not in emitted[1]
    assert emitted[2] == {"env_steps": 1, "workload": "maac"}


def test_verdict_fails_on_a_failed_check_or_side():
    record = {
        "workloads": {"magrpo": {"sides": {"ours": {"env_steps": 4}}}},
        "checks": {"mp_one_device": {"status": "passed"}},
    }
    assert report.verdict(record) == (True, [])
    record["checks"]["checkpoint_resume"] = {"status": "failed"}
    record["workloads"]["magrpo"]["sides"]["bare"] = {"status": "not_run"}
    ok, bad = report.verdict(record)
    assert not ok and len(bad) == 2
