"""The device paths of our trainers, each trained end to end and checked.

Usage: ``python -m benchmarks.gpu_check.paths SPEC.json``; prints one tagged line per check as
it finishes (so a run stopped by the time budget keeps the checks it completed). Each check is
``passed``, ``failed`` (with the reason or the traceback) or ``not_applicable`` (with the
reason: a second GPU on a one-GPU machine, say). The checks:

- ``bf16_training:<family>``: one epoch of each installed family's workload at the check's
  shape in the run's dtype; every logged loss finite, every trained weight finite, still in that
  dtype and on the device.
- ``save_model:<family>``: ``save_model`` of that trainer; each agent directory loads with
  plain ``from_pretrained`` (model and tokenizer), holds exactly the trained weights, and the
  loaded model samples on the device.
- ``mp_one_device`` / ``mp_two_devices``: MAGRPO with ``parallel_training="mp"``, both agents on
  one device, then one agent per GPU (needs two).
- ``gradient_checkpointing``: MAGRPO with activation checkpointing on every agent (a config knob
  when the config has one, else enabled on the models before they are handed to the trainer).
- ``checkpoint_resume``: a checkpoint written on the device, restored into a fresh trainer with
  exactly the saved weights and optimizer state on the device, then a resumed epoch.
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
import tempfile
import traceback
from dataclasses import fields

import torch

CHECK_PREFIX = "GPU_CHECK "

# The check runs: a few prompts and short answers, enough to cross every code path once.
CHECK_SHAPE = {
    "0.5b": dict(num_items=4, num_generations=4, max_new_tokens=32),
    "tiny": dict(num_items=2, num_generations=2, max_new_tokens=8),
}
# Large enough that one AdamW step moves bf16 weights (5e-6, the workloads' rate, mostly rounds
# away in bf16), so "the weights changed" is a real test of the gradient path.
CHECK_LR = 1e-3


def emit_check(name: str, status: str, reason: str | None = None, **detail) -> dict:
    """Print one check's outcome as a tagged JSON line and return it."""
    record = {"name": name, "status": status, "reason": reason, "detail": detail}
    sys.stdout.write(CHECK_PREFIX + json.dumps(record, default=str) + "\n")
    sys.stdout.flush()
    return record


def expected_device(name: str) -> torch.device:
    """``cuda`` means ``cuda:0``: the device a parameter reports."""
    dev = torch.device(name)
    if dev.type == "cuda" and dev.index is None:
        return torch.device("cuda", 0)
    return dev


def logged_losses(run_dir: str) -> list[float]:
    """Every loss value a trainer wrote to its run's metrics.jsonl."""
    from comlrl.core.logging.jsonl import read_metrics

    path = os.path.join(run_dir, "metrics.jsonl")
    values = []
    for record in read_metrics(path) if os.path.exists(path) else []:
        for key, value in record.items():
            if "loss" in key and isinstance(value, (int, float)):
                values.append(float(value))
    return values


def snapshot(trainer) -> dict[str, torch.Tensor]:
    """CPU copies of every trained weight, keyed ``model/parameter``."""
    return {
        f"{name}/{key}": t.detach().to("cpu", copy=True)
        for name, model in trainer.trainable_models().items()
        for key, t in model.state_dict().items()
    }


def weights_report(trainer, dtype: torch.dtype, devices: list[torch.device]) -> dict:
    """Dtype, device and finiteness of the agents' weights (agent ``i`` on ``devices[i]``)."""
    wrong_dtype, wrong_device, nonfinite = set(), set(), []
    for i, model in enumerate(trainer.agents):
        for key, p in model.named_parameters():
            if p.dtype != dtype:
                wrong_dtype.add(str(p.dtype))
            if p.device != devices[i]:
                wrong_device.add(f"agent_{i}:{p.device}")
            if not torch.isfinite(p).all():
                nonfinite.append(f"agent_{i}/{key}")
    for name, model in trainer.trainable_models().items():
        if name.startswith("agent_"):
            continue
        for key, p in model.named_parameters():
            if not torch.isfinite(p).all():
                nonfinite.append(f"{name}/{key}")
    return {
        "wrong_dtypes": sorted(wrong_dtype),
        "wrong_devices": sorted(wrong_device),
        "nonfinite_weights": nonfinite[:5],
    }


def changed_fraction(before: dict[str, torch.Tensor], trainer) -> float:
    """Share of the agents' weight elements that training changed."""
    after = snapshot(trainer)
    changed = total = 0
    for key, old in before.items():
        if key.startswith("agent_") and old.is_floating_point():
            changed += int((after[key] != old).sum())
            total += old.numel()
    return changed / max(1, total)


def training_problems(losses: list[float] | None, report: dict) -> list[str]:
    """Why a training run fails its check (empty: it passes); ``losses=None`` judges only the
    weights (a trainer that restored a checkpoint and trained no further)."""
    problems = []
    if losses is None:
        pass
    elif not losses:
        problems.append("no loss was logged")
    elif not all(math.isfinite(v) for v in losses):
        problems.append(f"non-finite losses: {[v for v in losses if not math.isfinite(v)][:5]}")
    for key, label in (
        ("wrong_dtypes", "weights in another dtype"),
        ("wrong_devices", "weights on another device"),
        ("nonfinite_weights", "non-finite weights"),
    ):
        if report[key]:
            problems.append(f"{label}: {report[key]}")
    return problems


def family_spec(spec: dict, family: str) -> dict:
    """The spec of one family's workload at the check's shape."""
    from benchmarks.gpu_check.shapes import WORKLOADS

    fields_ = dict(WORKLOADS[spec["size"]][family].fields)
    fields_.update(CHECK_SHAPE[spec["size"]])
    k, items = fields_["num_generations"], fields_["num_items"]
    if family == "magrpo":
        fields_["rollout_buffer_size"] = items
    elif family in ("iac", "maac"):
        fields_["rollout_buffer_size"] = items * k
    else:
        fields_.update(num_candidates=k, pairs_per_prompt=2, rollout_buffer_size=2 * items)
    out = dict(spec)
    out.update(fields_, workload=family)
    return out


def check_family(spec: dict, family: str) -> None:
    """``bf16_training:<family>`` and then ``save_model:<family>`` on the same trainer."""
    from benchmarks.ours import BUILDERS

    dtype = getattr(torch, spec["dtype"])
    device = expected_device(spec["device"])
    fspec = family_spec(spec, family)
    name = f"{spec['dtype']}_training:{family}"
    with tempfile.TemporaryDirectory(prefix="comlrl-gpu-check-") as run_dir:
        try:
            trainer = BUILDERS[family](fspec, run_dir)(1, fspec["num_items"])
            before = snapshot(trainer)
            trainer.train()
            losses = logged_losses(run_dir)
            report = weights_report(trainer, dtype, [device] * len(trainer.agents))
            problems = training_problems(losses, report)
            emit_check(
                name,
                "failed" if problems else "passed",
                "; ".join(problems) or None,
                losses_logged=len(losses),
                # information, not a criterion: at the workloads' learning rate of 5e-6, pure
                # bf16 AdamW rounds most updates away
                weights_changed_fraction=changed_fraction(before, trainer),
                learning_rate=fspec["learning_rate"],
                env_steps=int(trainer.env_step),
                **memory(spec["device"]),
            )
        except Exception:  # reported as this check's failure, never dropped
            emit_check(name, "failed", traceback.format_exc(limit=12)[-4000:])
            emit_check(f"save_model:{family}", "failed", f"{name} did not produce a trainer")
            return
        check_save_model(trainer, spec, family)


def check_save_model(trainer, spec: dict, family: str) -> None:
    """``save_model``'s directories load with plain ``from_pretrained`` and hold the weights."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = f"save_model:{family}"
    device = expected_device(spec["device"])
    try:
        with tempfile.TemporaryDirectory(prefix="comlrl-gpu-save-") as out:
            trainer.save_model(out)
            problems, loaded_dtypes = [], []
            for i, agent in enumerate(trainer.agents):
                path = os.path.join(out, f"agent_{i}")
                model = AutoModelForCausalLM.from_pretrained(path)
                tok = AutoTokenizer.from_pretrained(path)
                loaded_dtypes.append(str(model.dtype))
                want = agent.state_dict()
                got = model.state_dict()
                if set(want) != set(got):
                    problems.append(
                        f"agent_{i}: saved keys differ: {sorted(set(want) ^ set(got))[:5]}"
                    )
                    continue
                diff = [k for k in want if not torch.equal(want[k].float().cpu(), got[k].float())]
                if diff:
                    problems.append(f"agent_{i}: weights differ from the trained ones: {diff[:5]}")
                model.to(device)
                enc = tok(["Write a story about a cat."], return_tensors="pt").to(device)
                with torch.inference_mode():
                    sampled = model.generate(
                        **enc, max_new_tokens=4, do_sample=True, pad_token_id=tok.pad_token_id
                    )
                if sampled.shape[1] <= enc["input_ids"].shape[1]:
                    problems.append(f"agent_{i}: the loaded model generated nothing")
                del model
        emit_check(
            name,
            "failed" if problems else "passed",
            "; ".join(problems) or None,
            loaded_dtypes=loaded_dtypes,
        )
    except Exception:  # reported as this check's failure, never dropped
        emit_check(name, "failed", traceback.format_exc(limit=12)[-4000:])


def memory(device: str) -> dict:
    """Peak GPU memory of this process since the last reset (nothing on a CPU)."""
    if device.startswith("cuda") and torch.cuda.is_available():
        return {"peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20}
    return {}


def main() -> None:
    from benchmarks.gpu_check import magrpo_checks

    with open(sys.argv[1]) as fh:
        spec = json.load(fh)
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    for family in spec["families"]:
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        check_family(spec, family)
    if "magrpo" in spec["families"]:
        magrpo_checks.run_all(spec)


def config_has(config_cls, name: str) -> bool:
    """Whether a config dataclass has a field ``name``."""
    return name in {f.name for f in fields(config_cls)}


if __name__ == "__main__":
    main()
