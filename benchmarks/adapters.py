"""Peak memory of N agents on one base (``peft_config`` with one model source for all).

Each case runs in a fresh subprocess, which builds a MAGRPO trainer over a random-init
Qwen2-shaped model saved to disk (about 35M parameters), with LoRA on q_proj/v_proj, and then
reports its peak resident set size (``resource.getrusage``, ru_maxrss). No timing is measured.

    uv run --frozen python -m benchmarks adapters [--agents 1 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

LORA = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}


def _model_dir(root: str) -> str:
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    path = os.path.join(root, "base")
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=8192, hidden_size=512, intermediate_size=1536,
                      num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=8)  # fmt: skip
    AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    from transformers import AutoTokenizer

    from comlrl.core.testing import tiny_model_dir

    AutoTokenizer.from_pretrained(tiny_model_dir()).save_pretrained(path)
    return path


def _child(model_dir: str, n: int) -> None:
    import resource

    from comlrl.core.models.adapters import parameter_bytes
    from comlrl.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer

    trainer = MAGRPOTrainer(
        agents=[model_dir] * n,
        train_dataset=[{"prompt": "a"}],
        reward_func=lambda *cs: [0.0] * len(cs[0]),
        args=MAGRPOConfig(
            num_agents=n,
            num_turns=1,
            peft_config=LORA,
            reference_kl_enabled=True,
            output_dir=tempfile.mkdtemp(),
        ),  # fmt: skip
    )
    from comlrl.core.models.reference import reference_models_for

    refs = reference_models_for(trainer)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"agents": n, "peak_rss_mib": round(peak_kib / 1024, 1),
                      "parameter_mib": round(parameter_bytes(trainer.agents) / 2**20, 1),
                      "references": len(refs)}))  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks adapters")
    p.add_argument("--agents", nargs="+", type=int, default=[1, 4])
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return 0
    with tempfile.TemporaryDirectory() as root:
        model_dir = _model_dir(root)
        for n in args.agents:
            cmd = [sys.executable, "-m", "benchmarks", "adapters", "--child", model_dir, str(n)]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode:
                sys.stderr.write(out.stderr[-3000:])
                return 1
            out = out.stdout
            print(out.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
