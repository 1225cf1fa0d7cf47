"""The vLLM backend's CPU-side pieces, without vLLM: the sampling-parameter mapping, the
options, adapter bookkeeping, the weight-sync schedule, the engine's keyword arguments, the
backend registry and the missing-extra error at config time."""

from __future__ import annotations

import importlib.util

import pytest

from comlrl.core.errors import MissingPackageError
from comlrl.core.rollout.backends.vllm.adapters import AdapterBook
from comlrl.core.rollout.backends.vllm.engine import llm_kwargs
from comlrl.core.rollout.backends.vllm.options import VLLMOptions, vllm_options
from comlrl.core.rollout.backends.vllm.sampling import sampling_kwargs
from comlrl.core.rollout.backends.vllm.weights import WeightSync
from comlrl.core.rollout.generation import SamplingParams


def test_sampling_maps_one_to_one():
    p = SamplingParams(max_new_tokens=17, temperature=0.7, top_p=0.9, top_k=20)
    kw = sampling_kwargs(p, n=8, seed=5, eos_ids={2, 9})
    assert kw == dict(
        n=8,
        max_tokens=17,
        temperature=0.7,
        top_p=0.9,
        top_k=20,
        min_p=0.0,
        repetition_penalty=1.0,
        seed=5,
        stop_token_ids=[2, 9],
        logprobs=0,
        detokenize=False,
    )


def test_no_top_k_is_minus_one_and_greedy_is_temperature_zero():
    assert sampling_kwargs(SamplingParams(top_k=None), n=1)["top_k"] == -1
    assert sampling_kwargs(SamplingParams(top_k=0), n=1)["top_k"] == -1
    greedy = sampling_kwargs(SamplingParams(do_sample=False, top_k=5), n=1)
    assert (greedy["temperature"], greedy["top_k"], greedy["top_p"]) == (0.0, -1, 1.0)
    with pytest.raises(ValueError, match="do_sample"):
        sampling_kwargs(SamplingParams(do_sample=False), n=4)


def test_min_p_and_repetition_penalty_from_the_config_or_train_kwargs():
    p = SamplingParams(extra={"min_p": 0.05, "repetition_penalty": 1.1, "temperature": 0.5})
    kw = sampling_kwargs(p, n=1)
    assert (kw["min_p"], kw["repetition_penalty"], kw["temperature"]) == (0.05, 1.1, 0.5)
    p = SamplingParams()
    p.min_p, p.repetition_penalty = 0.1, 1.2  # config fields, where a config has them
    kw = sampling_kwargs(p, n=1)
    assert (kw["min_p"], kw["repetition_penalty"]) == (0.1, 1.2)


def test_generate_kwargs_without_a_vllm_meaning_are_errors_naming_them():
    with pytest.raises(ValueError, match=r"\['no_repeat_ngram_size'\].*valid:"):
        sampling_kwargs(SamplingParams(extra={"no_repeat_ngram_size": 3}), n=1)
    with pytest.raises(ValueError, match="num_beams=4"):
        sampling_kwargs(SamplingParams(extra={"num_beams": 4}), n=1)


def test_options_defaults_and_errors_name_the_key():
    assert vllm_options(None) == VLLMOptions()
    assert vllm_options({"weight_sync_interval": 4}).weight_sync_interval == 4
    with pytest.raises(
        ValueError, match=r"no key 'gpu_memory'.*did you mean 'gpu_memory_utilization'"
    ):
        vllm_options({"gpu_memory": 0.5})
    with pytest.raises(ValueError, match=r"gpu_memory_utilization must be a number in \(0, 1\]"):
        vllm_options({"gpu_memory_utilization": 1.5})
    with pytest.raises(ValueError, match="weight_sync_interval must be an integer >= 1"):
        vllm_options({"weight_sync_interval": 0})
    with pytest.raises(ValueError, match="dtype must be one of"):
        vllm_options({"dtype": "int8"})


def test_adapter_slots_take_fresh_ids_and_folders(tmp_path):
    book = AdapterBook([0, 2], str(tmp_path))
    assert book.current(0) is None
    s0, old = book.renew(0)
    assert old is None and s0.version == 0 and s0.lora_id >= 1
    s2, _ = book.renew(2)
    s0b, old = book.renew(0)
    assert old == s0 and s0b.version == 1
    assert len({s0.lora_id, s2.lora_id, s0b.lora_id}) == 3
    assert s0b.path != s0.path and book.current(0) == s0b
    book.discard(old)
    assert not (tmp_path / "agent0" / "v0").exists()
    with pytest.raises(ValueError, match="agent 1 has no adapter slot"):
        book.renew(1)


def test_weight_sync_counts_steps_until_due():
    sync = WeightSync([0, 1], interval=2)
    sync.stepped(0)
    assert not sync.due(0)
    sync.stepped(0)
    assert sync.due(0) and not sync.due(1)
    sync.pushed(0)
    assert sync.unpushed(0) == 0 and sync.pushes[0] == 1
    with pytest.raises(ValueError, match="weight_sync_interval"):
        WeightSync([0], interval=0)


def test_engine_kwargs_share_the_gpu_and_serve_one_lora_per_agent():
    opts = vllm_options({"gpu_memory_utilization": 0.4, "enable_sleep_mode": True})
    kw = llm_kwargs("Qwen/Qwen2.5-0.5B", max_loras=2, max_lora_rank=16, options=opts, seed=3)
    assert kw["gpu_memory_utilization"] == 0.4 and kw["enable_sleep_mode"] is True
    assert (kw["enable_lora"], kw["max_loras"], kw["max_lora_rank"]) == (True, 2, 16)
    assert kw["skip_tokenizer_init"] is True and kw["seed"] == 3
    full = llm_kwargs("m", max_loras=0, max_lora_rank=None, options=opts, seed=0)
    assert "enable_lora" not in full
    # vLLM serves only some ranks: r=4 adapters need max_lora_rank 8.
    assert llm_kwargs("m", max_loras=1, max_lora_rank=4, options=opts, seed=0)["max_lora_rank"] == 8
    assert (
        llm_kwargs("m", max_loras=1, max_lora_rank=300, options=opts, seed=0)["max_lora_rank"]
        == 320
    )
    with pytest.raises(ValueError, match="LoRA rank 1024"):
        llm_kwargs("m", max_loras=1, max_lora_rank=1024, options=opts, seed=0)


def test_core_imports_no_vllm():
    import sys

    import comlrl.core.rollout.backends.vllm.backend  # noqa: F401
    import comlrl.core.trainer  # noqa: F401

    assert "vllm" not in sys.modules


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_without_vllm_the_config_fails_with_the_install_line():
    from comlrl.core.config.base import CommonConfig

    with pytest.raises(ValueError) as err:
        CommonConfig(rollout_backend="vllm")
    msg = str(err.value)
    assert "rollout_backend='vllm'" in msg and "pip install 'comlrl-core[vllm]'" in msg
    assert "\n" not in msg
    assert isinstance(err.value, MissingPackageError)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_without_vllm_the_command_fails_in_one_line_before_any_model_loads(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "comlrl.core.cli", "train", "--set", "rollout.backend=vllm"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [x for x in proc.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and "pip install 'comlrl-core[vllm]'" in lines[0], proc.stderr


def test_hf_takes_only_its_own_options():
    from comlrl.core.config.base import CommonConfig

    with pytest.raises(ValueError, match="not options of rollout_backend='hf'; valid: mixed"):
        CommonConfig(rollout_backend_options={"gpu_memory_utilization": 0.5})
    with pytest.raises(ValueError, match="mixed_adapters must be true or false"):
        CommonConfig(rollout_backend_options={"mixed_adapters": "no"})
    CommonConfig(rollout_backend_options={"mixed_adapters": False})


def test_run_file_rollout_section_sets_the_fields():
    from comlrl.core.commands.launch import algorithm_config
    from comlrl.reinforce import MAGRPOConfig

    run = {"rollout": {"backend": "hf"}, "magrpo": {"num_generations": 2}}
    assert algorithm_config(run, MAGRPOConfig, "magrpo").rollout_backend == "hf"
    clash = {"rollout": {"backend": "hf"}, "magrpo": {"rollout_backend": "vllm"}}
    with pytest.raises(ValueError, match="rollout.backend.*disagree"):
        algorithm_config(clash, MAGRPOConfig, "magrpo")


def test_the_gpu_checks_vllm_phase_says_why_it_cannot_run(tmp_path):
    import json
    import subprocess
    import sys

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(dict(device="cpu", dtype="bfloat16", size="tiny", agent_dirs=[])))
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_check.vllm_phase", str(spec)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    records = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines()]
    assert [r["name"] for r in records] == ["vllm_conformance", "vllm_decode_speed"]
    assert all(r["status"] == "not_applicable" and r["reason"] for r in records)
