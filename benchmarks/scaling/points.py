"""The points of the scaling benchmark: one-factor-at-a-time sweeps around a base point.

The base point is MAGRPO with N=2 agents, K=4 samples per agent and node, T=1 turn, 64 new
tokens and aligned joint actions. Each sweep changes one factor of its anchor (the base point,
or for the cross sweep the base point with cross joint actions and K=2, since a cross tree holds
K^(N*t) joint actions at turn t). Every row runs to ``max_new_tokens`` (``min_new_tokens`` holds
EOS back on both sides), so the decoding work of a point is fixed and the token sweep really
decodes 64 and 256 tokens.

Each point also says how much it runs (items, epochs, warm-up items), sized so that the
reference side stays under about a minute per run on a 2-core machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.workloads import SAMPLING

# The factors a sweep may vary, by their spec field.
FACTORS = {
    "num_agents": "N",
    "num_generations": "K",
    "num_turns": "T",
    "max_new_tokens": "new tokens",
}

BASE = dict(num_agents=2, num_generations=4, num_turns=1, max_new_tokens=64, joint_mode="aligned")


@dataclass(frozen=True)
class Sweep:
    """One factor varied over ``values`` while the rest of ``anchor`` stays as it is."""

    name: str
    factor: str
    values: tuple
    anchor: dict = field(default_factory=lambda: dict(BASE))

    def settings(self) -> list[dict]:
        """The factor settings of the sweep's points, in order."""
        return [{**self.anchor, self.factor: v} for v in self.values]


SWEEPS = (
    Sweep("agents", "num_agents", (2, 4)),
    Sweep("samples", "num_generations", (4, 8, 16)),
    Sweep("turns (aligned)", "num_turns", (1, 2, 3)),
    Sweep(
        "turns (cross, K=2)",
        "num_turns",
        (1, 2, 3),
        {**BASE, "joint_mode": "cross", "num_generations": 2},
    ),
    Sweep("new tokens", "max_new_tokens", (64, 256)),
)

# How much each point runs: (items, timed epochs, warm-up items). Items stay at 8 wherever the
# reference's run fits in about a minute, so our side decodes the same rows per call (items x K)
# as at the base point; only the 3-turn trees (84 env steps per item) drop to 2 items. The key
# is point_key() of the settings.
DEFAULT_RUN = (8, 1, 2)
RUNS = {
    "n2-k4-t1-aligned-64": (8, 2, 2),
    "n2-k4-t3-aligned-64": (2, 1, 1),
    "n2-k2-t1-cross-64": (8, 2, 2),
    "n2-k2-t3-cross-64": (2, 1, 1),
    "n2-k4-t1-aligned-256": (8, 1, 1),
}


def point_key(settings: dict) -> str:
    """A short stable name of a point, e.g. ``n2-k4-t1-aligned-64``."""
    return (
        f"n{settings['num_agents']}-k{settings['num_generations']}-t{settings['num_turns']}"
        f"-{settings['joint_mode']}-{settings['max_new_tokens']}"
    )


def joint_actions_per_node(settings: dict) -> int:
    """K joint actions per node when aligned, K^N when cross (N > 1)."""
    k, n = settings["num_generations"], settings["num_agents"]
    return k**n if settings["joint_mode"] == "cross" and n > 1 else k


def nodes_per_item(settings: dict) -> int:
    """Tree nodes of one item with no early stop: sum over turns of (joint actions)^(t-1)."""
    branching = joint_actions_per_node(settings)
    return sum(branching**t for t in range(settings["num_turns"]))


def env_steps_per_item(settings: dict) -> int:
    """Joint actions scored for one item: each node scores all of its joint actions."""
    return nodes_per_item(settings) * joint_actions_per_node(settings)


@dataclass(frozen=True)
class Point:
    """One scaling point: its settings, the sweeps it belongs to, and how much it runs."""

    key: str
    settings: dict
    sweeps: tuple
    items: int
    epochs: int
    warmup_items: int

    @property
    def env_steps(self) -> int:
        """Env steps of the timed run."""
        return env_steps_per_item(self.settings) * self.items * self.epochs

    def spec(self, *, model_dir: str, device: str, threads: int | None, seed: int) -> dict:
        """The spec every side reads (the MAGRPO builders of benchmarks/ours.py and the
        reference driver)."""
        s = self.settings
        spec = dict(
            workload="magrpo",
            point=self.key,
            size="tiny",
            model_dir=model_dir,
            device=device,
            seed=seed,
            threads=threads,
            num_agents=s["num_agents"],
            num_generations=s["num_generations"],
            num_turns=s["num_turns"],
            joint_mode=s["joint_mode"],
            max_new_tokens=s["max_new_tokens"],
            min_new_tokens=s["max_new_tokens"],
            num_items=self.items,
            epochs=self.epochs,
            warmup_epochs=1,
            warmup_items=self.warmup_items,
            learning_rate=5e-6,
            logging_steps=1,
            # every node of a batch's trees: one update per batch (= per epoch) on both sides
            rollout_buffer_size=nodes_per_item(s) * self.items,
            # our memory knob (padded tokens per loss forward): without a cap, one forward over a
            # whole buffer of multi-turn or K=16 rows peaked above the reference's RSS
            logprob_max_tokens=2048,
            **SAMPLING,
        )
        return spec


def all_points() -> list[Point]:
    """Every distinct point of every sweep, in sweep order (a shared point appears once)."""
    found: dict[str, Point] = {}
    for sweep in SWEEPS:
        for settings in sweep.settings():
            key = point_key(settings)
            if key in found:
                prev = found[key]
                found[key] = Point(key, prev.settings, prev.sweeps + (sweep.name,), *_run(key))
                continue
            found[key] = Point(key, dict(settings), (sweep.name,), *_run(key))
    return list(found.values())


def _run(key: str) -> tuple[int, int, int]:
    return RUNS.get(key, DEFAULT_RUN)


def select(points: list[Point], keys: list[str] | None) -> list[Point]:
    """The points named in ``keys`` (all when None); an unknown name is a ValueError."""
    if not keys:
        return points
    known = {p.key: p for p in points}
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise ValueError(f"--points: unknown point(s) {unknown}; valid: {sorted(known)}")
    return [known[k] for k in keys]
