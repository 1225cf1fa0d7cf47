"""The GRPOConfig fields every TRL side of the benchmarks shares, read from a spec.

Written for the TRL venv (no comlrl import): the model's sampling and learning rate as the
spec gives them, no KL term (``beta=0``, as our MAGRPO), no checkpoints, no reporting.
"""

from __future__ import annotations


def grpo_fields(spec: dict, out_dir: str, rows_per_step: int) -> dict:
    """Keyword arguments of ``GRPOConfig`` for ``spec``, ``rows_per_step`` completions (prompts
    x K) per optimizer step; callers add their step count and memory options."""
    return dict(
        output_dir=out_dir,
        per_device_train_batch_size=rows_per_step,
        num_generations=spec["num_generations"],
        max_completion_length=spec["max_new_tokens"],
        temperature=spec["temperature"],
        top_p=spec["top_p"],
        top_k=spec["top_k"],
        learning_rate=spec["learning_rate"],
        beta=0.0,
        save_strategy="no",
        report_to="none",
        use_cpu=spec["device"] == "cpu",
        seed=spec["seed"],
        dataloader_num_workers=0,
    )
