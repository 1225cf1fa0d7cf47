"""A CoMLRL-style user script runs unchanged through the compat path, and its agents reload."""

import runpy
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def test_compat_quickstart_runs_and_agents_reload(tmp_path, tiny_dir, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setattr(
        sys, "argv", ["compat_quickstart.py", "--model", tiny_dir, "--out", str(out)]
    )
    runpy.run_path(str(ROOT / "examples" / "compat_quickstart.py"), run_name="__main__")
    assert (out / "metrics.jsonl").exists()
    from transformers import AutoModelForCausalLM

    from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer

    # saved agents reload into a new trainer and keep training
    reloaded = AutoModelForCausalLM.from_pretrained(out / "models" / "agent_0")
    base = AutoModelForCausalLM.from_pretrained(tiny_dir)
    changed = any(not torch.equal(p, q) for p, q in zip(reloaded.parameters(), base.parameters()))
    assert changed
    trainer = MAGRPOTrainer(
        agents=[str(out / "models" / "agent_0"), str(out / "models" / "agent_1")],
        train_dataset=[{"prompt": "Write a story about a cat."}],
        reward_func=lambda a, b: [float(len(y) - len(x)) for x, y in zip(a, b)],
        args=MAGRPOConfig(
            num_train_epochs=1,
            num_generations=2,
            max_new_tokens=8,
            num_turns=1,
            eval_interval=0,
            temperature=1.0,
            output_dir=str(tmp_path / "again"),
        ),
    )
    before = [p.detach().clone() for p in trainer.agents[0].parameters()]
    trainer.train()
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.agents[0].parameters()))
