"""Add a rollout backend: where completions come from.

A backend implements ``generate(agent, prompts, n, params, seeds=None)`` (returning one
``PromptSamples`` per prompt) and ``on_weights_updated(agent, model)``, which the shared
optimizer step calls after every update of an agent; a backend that serves its own copy of the
weights (a vLLM or SGLang server) refreshes it there. This one wraps the default Hugging Face
backend and counts requests, tokens and weight updates.

Run:  uv run --frozen python examples/extending/custom_backend.py
"""

import argparse
import sys
from pathlib import Path

from comlrl.core.rollout.backend import HFBackend

sys.path.insert(0, str(Path(__file__).parent))


class CountingBackend:
    """Delegates to another backend and keeps counts."""

    def __init__(self, inner):
        self.inner = inner
        self.requests = 0
        self.tokens = 0
        self.updates = 0

    def generate(self, agent, prompts, n, params, seeds=None):
        samples = self.inner.generate(agent, prompts, n, params, seeds)
        self.requests += 1
        self.tokens += sum(s.num_tokens for s in samples)
        return samples

    def on_weights_updated(self, agent, model):
        self.updates += 1
        self.inner.on_weights_updated(agent, model)


def main(argv=None):
    from _common import tiny_run

    from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

    parser = argparse.ArgumentParser(description="MAGRPO sampling through a custom backend.")
    parser.add_argument("--out", default="runs/custom_backend")
    args = parser.parse_args(argv)
    trainer = tiny_run(MAGRPOTrainer, MAGRPOConfig, args.out)
    backend = CountingBackend(HFBackend(trainer.agents, trainer.tokenizers))
    trainer.rollout_backend = backend
    trainer.train()
    print(f"{backend.requests} requests, {backend.tokens} tokens, {backend.updates} updates")
    return trainer, backend


if __name__ == "__main__":
    main()
