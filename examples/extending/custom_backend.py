"""Add a rollout backend: where completions come from.

A backend implements the two methods of ``comlrl.core.rollout.backends.RolloutBackend``:
``generate_ids(agent, prompt_ids, n, params, seeds=None)``, which returns one ``SampledIds``
per prompt (token ids in, token ids out), and ``on_weights_updated(agent, model)``, which the
shared optimizer step calls after every update of an agent; a backend that serves its own copy
of the weights (a vLLM or SGLang server) refreshes it there. It is registered under a name
with a factory that builds it from a ``BackendInputs`` (the loaded agents, their tokenizers,
the config), and the ``rollout_backend`` config field chooses it by that name. This one wraps
the default Hugging Face backend and counts requests, tokens and weight updates.

Run:  uv run --frozen python examples/extending/custom_backend.py
"""

import argparse
import sys
from pathlib import Path

from comlrl.core.rollout.backends import BackendInputs, register_rollout_backend
from comlrl.core.rollout.backends.hf import HFBackend

sys.path.insert(0, str(Path(__file__).parent))


class CountingBackend:
    """Delegates to another backend and keeps counts."""

    def __init__(self, inner):
        self.inner = inner
        self.requests = 0
        self.tokens = 0
        self.updates = 0

    def generate_ids(self, agent, prompt_ids, n, params, seeds=None):
        sampled = self.inner.generate_ids(agent, prompt_ids, n, params, seeds)
        self.requests += 1
        self.tokens += sum(len(c) for s in sampled for c in s.completion_ids)
        return sampled

    def on_weights_updated(self, agent, model):
        self.updates += 1
        self.inner.on_weights_updated(agent, model)


def build(inputs: BackendInputs) -> CountingBackend:
    """The factory ``rollout_backend: counting`` calls once the agents are loaded."""
    return CountingBackend(HFBackend(inputs.agents, inputs.tokenizers))


register_rollout_backend("counting", build)


def main(argv=None):
    from _common import tiny_run

    from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

    parser = argparse.ArgumentParser(description="MAGRPO sampling through a custom backend.")
    parser.add_argument("--out", default="runs/custom_backend")
    args = parser.parse_args(argv)
    trainer = tiny_run(MAGRPOTrainer, MAGRPOConfig, args.out, rollout_backend="counting")
    # Core samples text through the backend's ids with the agents' tokenizers; the backend
    # itself is what the factory built.
    backend = trainer.rollout_backend.backend
    trainer.train()
    print(f"{backend.requests} requests, {backend.tokens} tokens, {backend.updates} updates")
    return trainer, backend


if __name__ == "__main__":
    main()
