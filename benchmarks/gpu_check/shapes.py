"""The workloads of the GPU check, per model size.

``0.5b`` is the shape to run on a GPU; ``tiny`` has the same structure at a size a CPU runs in
seconds (the test suite runs it). All are single-turn: with K=8 a second turn would multiply
the reference's one-prompt-at-a-time sampling by eight and not fit the time budget.
"""

from __future__ import annotations

from benchmarks.workloads import SAMPLING, Workload


def _magrpo(k: int, items: int, tokens: int, budget: int) -> Workload:
    return Workload(
        name="magrpo",
        algorithm="magrpo",
        summary=f"MAGRPO: 2 agents, K={k}, {items} prompts, {tokens} new tokens, T=1",
        fields=dict(
            num_agents=2,
            num_generations=k,
            num_items=items,
            max_new_tokens=tokens,
            num_turns=1,
            learning_rate=5e-6,
            logging_steps=1,
            rollout_buffer_size=items,  # every root of the batch: one update per batch
            logprob_max_tokens=budget,
            **SAMPLING,
        ),
        epochs={"0.5b": 1, "tiny": 1},
    )


def _ac(name: str, k: int, items: int, tokens: int, budget: int) -> Workload:
    critic = "2 separate V critics" if name == "iac" else "1 centralized V critic"
    return Workload(
        name=name,
        algorithm=name,
        summary=f"{name.upper()}: 2 agents + {critic}, K={k}, {items} prompts, "
        f"{tokens} new tokens, T=1",
        fields=dict(
            num_agents=2,
            num_generations=k,
            num_items=items,
            max_new_tokens=tokens,
            num_turns=1,
            learning_rate=5e-6,
            logging_steps=1,
            rollout_buffer_size=items * k,  # every sample of the batch: one update per batch
            logprob_max_tokens=budget,
            **SAMPLING,
        ),
        epochs={"0.5b": 1, "tiny": 1},
    )


def _madpo(candidates: int, pairs: int, items: int, tokens: int, budget: int) -> Workload:
    return Workload(
        name="madpo",
        algorithm="madpo",
        summary=f"MADPO: 2 agents, {candidates} candidates and {pairs} pairs per prompt, "
        f"{items} prompts, {tokens} new tokens",
        fields=dict(
            num_agents=2,
            num_generations=candidates,
            num_candidates=candidates,
            pairs_per_prompt=pairs,
            num_items=items,
            max_new_tokens=tokens,
            num_turns=1,
            learning_rate=5e-6,
            logging_steps=1,
            rollout_buffer_size=8,  # pairs per DPO update
            logprob_max_tokens=budget,
            **SAMPLING,
        ),
        epochs={"0.5b": 1, "tiny": 1},
    )


WORKLOADS = {
    "0.5b": {
        "magrpo": _magrpo(k=8, items=16, tokens=128, budget=4096),
        "iac": _ac("iac", k=4, items=8, tokens=128, budget=4096),
        "maac": _ac("maac", k=4, items=8, tokens=128, budget=4096),
        "madpo": _madpo(candidates=8, pairs=4, items=8, tokens=128, budget=4096),
    },
    "tiny": {
        "magrpo": _magrpo(k=4, items=4, tokens=16, budget=256),
        "iac": _ac("iac", k=2, items=4, tokens=16, budget=256),
        "maac": _ac("maac", k=2, items=4, tokens=16, budget=256),
        "madpo": _madpo(candidates=4, pairs=2, items=4, tokens=16, budget=256),
    },
}

NAMES = ("magrpo", "iac", "maac", "madpo")
