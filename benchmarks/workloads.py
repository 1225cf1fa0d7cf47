"""The benchmark workloads: one shape per algorithm family, run on two model sizes."""

from __future__ import annotations

from dataclasses import dataclass, field

# Sampling shared by every workload (the reference's defaults).
SAMPLING = {"temperature": 0.6, "top_p": 0.6, "top_k": 50}

# Model sizes, as presets of comlrl.core.testing (tiny: ~0.1M parameters, small: ~5M).
SIZES = ("tiny", "small")


@dataclass(frozen=True)
class Workload:
    """One benchmark shape. ``fields`` go verbatim into every side's spec."""

    name: str
    algorithm: str
    summary: str
    fields: dict = field(default_factory=dict)
    # timed epochs per model size: enough work for a stable rate, short enough to repeat
    epochs: dict = field(default_factory=dict)
    # sides this workload can run (the bare-torch bound is written per family)
    sides: tuple = ("reference", "bare", "ours")
    # pre-training steps of the test models (None: the presets' default; 0: random init)
    pretrain_steps: int | None = None

    def env_steps_per_epoch(self) -> int:
        """Joint actions scored per epoch: items x K x K^(t-1) summed over the turns."""
        f = self.fields
        k, items = f["num_generations"], f["num_items"]
        return sum(items * k**t for t in range(1, f["num_turns"] + 1))


MAGRPO = Workload(
    name="magrpo",
    algorithm="magrpo",
    summary="MAGRPO: 2 agents, K=4, 8 prompts, 64 new tokens, T=2 (aligned tree, no early stop)",
    fields=dict(
        num_agents=2,
        num_generations=4,
        num_items=8,
        max_new_tokens=64,
        num_turns=2,
        learning_rate=5e-6,
        logging_steps=1,
        # every node of the 8 items' trees (8 roots + 32 children): one update per batch
        rollout_buffer_size=40,
        # our memory budget per loss forward (padded tokens); the bare side micro-batches alike
        logprob_max_tokens=512,
        **SAMPLING,
    ),
    epochs={"tiny": 3, "small": 1},
    sides=("reference", "bare", "ours", "plainhf"),
)

# Issue 18's shape for the untrained-model comparison: every row runs to max_new_tokens on every
# side (``min_new_tokens`` holds EOS back, as an untrained model would never emit it), so the
# decoding work is fixed and the same everywhere; a buffer of 4 nodes gives two updates a batch.
MAGRPO_UNTRAINED = Workload(
    name="magrpo_untrained",
    algorithm="magrpo",
    summary="MAGRPO, untrained-style: 2 agents, K=4, 8 prompts, every row 64 new tokens, T=1, "
    "buffer 4",
    fields=dict(
        num_agents=2,
        num_generations=4,
        num_items=8,
        max_new_tokens=64,
        min_new_tokens=64,
        num_turns=1,
        learning_rate=5e-6,
        logging_steps=1,
        rollout_buffer_size=4,
        # our memory budget per loss forward, as in the other workloads; with no cap one forward
        # holds a whole buffer's activations (the README gives that run's peak RSS too)
        logprob_max_tokens=512,
        **SAMPLING,
    ),
    epochs={"tiny": 3, "small": 1},
    sides=("reference", "bare", "ours", "plainhf"),
)

# The shape a user comparing libraries would try first: random-init agents (so almost every row
# runs to max_new_tokens), plain sampling at temperature 1, and a buffer of 4 nodes (16 rows)
# per update, as TRL's GRPOTrainer does with a batch of 16 and K=4. Its TRL side is one agent
# (GRPOTrainer trains one policy) over the same prompts.
MAGRPO_RANDOM = Workload(
    name="magrpo_random",
    algorithm="magrpo",
    summary="MAGRPO, random-init agents: 2 agents, K=4, 16 prompts, 64 new tokens, T=1, "
    "buffer 4, temperature 1",
    fields=dict(
        num_agents=2,
        num_generations=4,
        num_items=16,
        max_new_tokens=64,
        num_turns=1,
        learning_rate=5e-6,
        logging_steps=1,
        rollout_buffer_size=4,
        # no cap: what our default ("auto") gives a test-sized model, spelled so that revisions
        # from before "auto" existed run it too (benchmarks.guard, benchmarks.revisions)
        logprob_max_tokens=None,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
    ),
    epochs={"tiny": 3, "small": 1},
    sides=("reference", "ours", "plainhf", "trl"),
    pretrain_steps=0,
)

# The reference's actor-critic trainers allow K > 1 only in single-turn runs (multi-turn follows
# one trajectory per item), so the actor-critic shape keeps K=4 and uses one turn.
_AC_FIELDS = dict(
    num_agents=2,
    num_generations=4,
    num_items=8,
    max_new_tokens=64,
    num_turns=1,
    learning_rate=5e-6,
    logging_steps=1,
    rollout_buffer_size=32,  # every sample of the batch (8 prompts x K): one update per batch
    logprob_max_tokens=512,
    **SAMPLING,
)

IAC = Workload(
    name="iac",
    algorithm="iac",
    summary="IAC: 2 agents + 2 separate V critics, K=4, 8 prompts, 64 new tokens, T=1",
    fields=dict(_AC_FIELDS),
    epochs={"tiny": 3, "small": 1},
)

MAAC = Workload(
    name="maac",
    algorithm="maac",
    summary="MAAC: 2 agents + 1 centralized V critic, K=4, 8 prompts, 64 new tokens, T=1",
    fields=dict(_AC_FIELDS),
    epochs={"tiny": 3, "small": 1},
)

MADPO = Workload(
    name="madpo",
    algorithm="madpo",
    summary="MADPO: 2 agents, 16 candidates and 8 pairs per prompt, 8 prompts, 64 new tokens",
    fields=dict(
        num_agents=2,
        num_generations=16,
        num_candidates=16,
        pairs_per_prompt=8,
        num_items=8,
        max_new_tokens=64,
        num_turns=1,
        learning_rate=5e-6,
        logging_steps=1,
        rollout_buffer_size=8,  # pairs per DPO update
        # with a budget, both sides find the margins first and then backpropagate per micro-batch
        logprob_max_tokens=512,
        **SAMPLING,
    ),
    epochs={"tiny": 2, "small": 1},
)

WORKLOADS = {w.name: w for w in (MAGRPO, MAGRPO_UNTRAINED, MAGRPO_RANDOM, IAC, MAAC, MADPO)}
