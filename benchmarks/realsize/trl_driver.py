"""TRL side of the realsize matrix: one GRPOTrainer step, run inside the TRL venv.

Usage: ``python trl_driver.py SPEC.json`` with the interpreter of ``benchmarks/.venv-trl``
(:func:`benchmarks.refvenv.trl_python`); prints one tagged result line in the terms of our
cells: peak RSS and the step split into decode (``model.generate``), scoring (the model's
forwards outside decoding) and backward+step. TRL is the single-agent peer: one policy, the
same model directory, prompt, K, completion length, sampling and learning rate as our
``qwen05-magrpo-n1-*`` cells, no KL term (``beta=0``, as ours), and its gradient
checkpointing (on by default in ``GRPOConfig``) set by the spec like ours.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

# Run as a script from the TRL venv: make benchmarks/portable importable as a package.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from portable import tasks  # noqa: E402
from portable.measure import GenerateMeter, emit, environment, peak_rss_mib, seed_all  # noqa: E402
from portable.trl_config import grpo_fields  # noqa: E402


def _length_reward(completions, **_) -> list[float]:
    """The one-agent cells' reward (:func:`portable.tasks.length_reward`) in TRL's signature."""
    return tasks.length_reward(completions)


def _phases(model):
    """Seconds in the model's forwards outside ``generate``, in backward and in the optimizer
    step (hooks installed on ``model``, autograd and every optimizer)."""
    import torch
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    seconds = {"scoring": 0.0, "backward": 0.0, "step": 0.0}
    state = {"decoding": False, "step_start": 0.0}
    forward = model.forward

    def timed_forward(*args, **kwargs):
        if state["decoding"]:
            return forward(*args, **kwargs)
        start = time.perf_counter()
        try:
            return forward(*args, **kwargs)
        finally:
            seconds["scoring"] += time.perf_counter() - start

    model.forward = timed_forward
    generate = model.generate

    def flagged_generate(*args, **kwargs):
        state["decoding"] = True
        try:
            return generate(*args, **kwargs)
        finally:
            state["decoding"] = False

    model.generate = flagged_generate
    backward = torch.autograd.backward

    def timed_backward(*args, **kwargs):
        start = time.perf_counter()
        try:
            return backward(*args, **kwargs)
        finally:
            seconds["backward"] += time.perf_counter() - start

    torch.autograd.backward = timed_backward

    def pre(*_):
        state["step_start"] = time.perf_counter()

    def post(*_):
        seconds["step"] += time.perf_counter() - state["step_start"]

    register_optimizer_step_pre_hook(pre)
    register_optimizer_step_post_hook(post)
    return seconds


def run(spec: dict) -> dict:
    """Build a GRPOTrainer for the spec, train one step, report memory and the phase split."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(spec["threads"])
    seed_all(spec["seed"])
    k = spec["num_generations"]
    with tempfile.TemporaryDirectory(prefix="comlrl-realsize-trl-") as out_dir:
        start = time.perf_counter()
        tokenizer = AutoTokenizer.from_pretrained(spec["model_dir"])
        model = AutoModelForCausalLM.from_pretrained(spec["model_dir"])
        args = GRPOConfig(
            **grpo_fields(spec, out_dir, k * spec["num_items"]),
            max_steps=1,
            logging_steps=1,
            bf16=bool(spec.get("bf16")),
            gradient_checkpointing=bool(spec.get("gradient_checkpointing")),
        )
        prompts = [item["prompt"] for item in tasks.dataset(spec["num_items"])]
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=_length_reward,
            args=args,
            train_dataset=Dataset.from_list([{"prompt": p} for p in prompts]),
            processing_class=tokenizer,
        )
        load_seconds = time.perf_counter() - start
        meter = GenerateMeter()
        meter.attach(model, tokenizer.eos_token_id)
        seconds = _phases(model)
        start = time.perf_counter()
        trainer.train()
        train_seconds = time.perf_counter() - start
    return {
        "status": "measured",
        "peak_rss_gb": peak_rss_mib() / 1024,
        "load_seconds": load_seconds,
        "train_seconds": train_seconds,
        "decode_seconds": meter.seconds,
        "scoring_seconds": seconds["scoring"],
        "backward_step_seconds": seconds["backward"] + seconds["step"],
        "generated_tokens": meter.tokens,
        "environment": environment() | {"trl": __import__("trl").__version__},
    }


def main() -> None:
    with open(sys.argv[1]) as fh:
        emit(run(json.load(fh)))


if __name__ == "__main__":
    main()
