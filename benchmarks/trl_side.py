"""The TRL side of the ``magrpo_random`` workload: TRL's GRPOTrainer on one agent.

Run inside the TRL venv (``benchmarks/.venv-trl``, :func:`benchmarks.refvenv.trl_python`) as
``python benchmarks/trl_side.py SPEC.json``; prints one tagged result line, timed with the same
protocol as every other side (:mod:`benchmarks.portable.protocol`: a warm-up run on a few
items, then a fresh trainer under the timer).

GRPOTrainer trains one policy, so this side is one agent: the same model directory, prompts,
K, completion length, sampling and learning rate as ours, no KL term (``beta=0``, as ours),
one optimizer step per ``rollout_buffer_size`` prompts x K rows (its batch), and the length of
the answer as the reward (one agent has no ratio). An env step here is one completion, where
ours is one joint action of two agents: per env step our side decodes and trains two models.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

# Run as a script from the TRL venv: make benchmarks/portable importable as a package.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from portable import tasks  # noqa: E402
from portable.measure import emit, environment  # noqa: E402
from portable.protocol import timed_training  # noqa: E402
from portable.trl_config import grpo_fields  # noqa: E402


def _length_reward(completions, **_) -> list[float]:
    return tasks.length_reward(completions)


class _TRLRun:
    """A GRPOTrainer for ``epochs`` over ``num_items`` prompts, with the ``train()`` and
    ``env_step`` the protocol reads."""

    def __init__(self, spec: dict, epochs: int, num_items: int, out_dir: str):
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import GRPOConfig, GRPOTrainer

        k = spec["num_generations"]
        per_update = min(spec["rollout_buffer_size"], num_items)  # prompts per optimizer step
        self.tokenizer = AutoTokenizer.from_pretrained(spec["model_dir"])
        self.model = AutoModelForCausalLM.from_pretrained(spec["model_dir"])
        args = GRPOConfig(
            **grpo_fields(spec, out_dir, k * per_update),
            # its sampler has no length, so the steps are counted for it
            max_steps=epochs * -(-num_items // per_update),
            logging_steps=10**6,
            disable_tqdm=True,
        )
        prompts = [tasks.story_prompt(item) for item in tasks.dataset(num_items)]
        self.trainer = GRPOTrainer(
            model=self.model,
            reward_funcs=_length_reward,
            args=args,
            train_dataset=Dataset.from_list([{"prompt": p} for p in prompts]),
            processing_class=self.tokenizer,
        )
        self.env_step = 0
        self._planned = epochs * num_items * k

    def train(self) -> None:
        self.trainer.train()
        self.env_step = self._planned


def main() -> None:
    import torch

    with open(sys.argv[1]) as fh:
        spec = json.load(fh)
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    with tempfile.TemporaryDirectory(prefix="comlrl-bench-trl-") as out_dir:
        result = timed_training(
            lambda epochs, items: _TRLRun(spec, epochs, items, out_dir),
            lambda run, meter: meter.attach(run.model, run.tokenizer.eos_token_id),
            spec,
        )
    result["side"] = "trl"
    result["environment"] = environment() | {"trl": __import__("trl").__version__}
    emit(result)


if __name__ == "__main__":
    main()
