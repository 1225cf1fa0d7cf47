"""The walk of one training step, unfolded: ``python -m benchmarks.walk`` writes
docs/architecture.md's walk section; ``tests/benchmarks/test_walk.py`` fails when it is stale.

A *step* is one unit of the shared loop that ends in an update (``loop.run_unit(trainer, unit)``):
MAGRPO rolls out one batch of items and updates on the full buffer, IAC the same with its
critics, MADPO takes one DPO update on a batch of already sampled pairs.

The walk is what a reader follows from the unit to the weights changing: every function of the
comlrl packages on the call stack, from ``run_unit`` down, at each of the step's landmarks, in
the order they are first reached, nothing folded. The landmarks are the calls of the registered
math (an advantage estimator, a policy or preference loss: the objective), the first forward
with gradients (the update's scoring) and the first ``optimizer.step()``. Each hop is marked with the indirection it takes, if any:

- *callback*: core calls a family function it was handed (a core file calling a family file;
  the loop calling the family's ``Algorithm`` methods is the contract, not a callback);
- *closure*: a function defined inside another (a lambda included);
- *generator*: a lazy generator, whose body runs when another function draws from it;
- *registry*: a function found by name in core's math registry.

The *objective files* are the files of the registered math the step called: a family's math
module and core's (``tests/benchmarks/test_walk.py`` checks that the rest of the objective, the
normalizations, row weights and the KL term, lives in the same files). Numbers of calls are left out: they follow the sampled
lengths, which differ between machines.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- walk:start (python -m benchmarks.walk) -->", "<!-- walk:end -->"
_PACKAGES = str(ROOT / "packages")
SPINE = ("comlrl/core/loop/", "comlrl/core/trainer.py")
INDIRECTIONS = ("callback", "closure", "generator", "registry")


@dataclass(frozen=True)
class Hop:
    """One function on the walk: its file, its qualified name and the indirection it takes
    (None: a plain call)."""

    file: str
    function: str
    via: str | None = None


@dataclass
class Walk:
    """One step's walk: its hops in first-reached order, the files holding the objective, and
    every package file the step entered (for the size of the whole trace)."""

    name: str
    hops: list[Hop] = field(default_factory=list)
    objective: list[str] = field(default_factory=list)
    files: set[str] = field(default_factory=set)

    @property
    def indirections(self) -> int:
        return sum(1 for h in self.hops if h.via is not None)

    @property
    def walk_files(self) -> list[str]:
        return list(dict.fromkeys(h.file for h in self.hops))


def _relative(path: str) -> str | None:
    if not path.startswith(_PACKAGES) or "/src/comlrl/" not in path:
        return None
    return path.split("/src/", 1)[1]


def _layer(rel: str) -> str:
    return "core" if rel.startswith("comlrl/core/") else "family"


def _registered_codes() -> set:
    """The code objects of every function in core's math registry."""
    from comlrl.core import algos

    codes = set()
    for kind in ("advantage", "policy_loss", "preference_loss"):
        for name in algos.available(kind):
            fn = inspect.unwrap(algos.get(kind, name, kind))
            codes.add(fn.__code__)
    return codes


def _is_optimizer_step(code) -> bool:
    return code.co_name == "step" and "/torch/optim/" in code.co_filename


_COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def _is_training_forward(code) -> bool:
    """A model's ``forward`` with gradients on: the update's scoring (rollouts and reference
    scores run without gradients)."""
    import torch

    if code.co_name != "forward" or not torch.is_grad_enabled():
        return False
    return "/transformers/" in code.co_filename or "/peft/" in code.co_filename


def _via(code, rel: str, caller: str | None, registered: set) -> str | None:
    if code in registered:
        return "registry"
    if code.co_name in _COMPREHENSIONS:
        return None  # read in place, not a hop elsewhere
    if code.co_flags & inspect.CO_GENERATOR:
        return "generator"
    if "<locals>" in code.co_qualname or code.co_name == "<lambda>":
        return "closure"
    if (
        caller is not None
        and _layer(caller) == "core"
        and _layer(rel) == "family"
        and not caller.startswith(SPINE)
    ):
        return "callback"
    return None


def _stack(frame, registered: set) -> list[Hop]:
    """The package hops on ``frame``'s stack from ``run_unit`` down, outermost first."""
    frames = []
    while frame is not None:
        frames.append(frame)
        if frame.f_code.co_name == "run_unit":
            break
        frame = frame.f_back
    hops: list[Hop] = []
    caller: str | None = None
    for f in reversed(frames):
        rel = _relative(f.f_code.co_filename)
        if rel is None or f.f_code.co_name in _COMPREHENSIONS:
            continue
        hops.append(Hop(rel, f.f_code.co_qualname, _via(f.f_code, rel, caller, registered)))
        caller = rel
    return hops


def trace(name: str, step: Callable[[], None]) -> Walk:
    """Run ``step`` under a profiler and return its :class:`Walk`."""
    walk = Walk(name)
    registered = _registered_codes()
    seen: set[Hop] = set()
    objective: dict[str, None] = {}
    stepped, scored = [False], [False]

    def add(frame) -> None:
        for hop in _stack(frame, registered):
            if hop not in seen:
                seen.add(hop)
                walk.hops.append(hop)

    def profile(frame, event, arg):
        code = frame.f_code
        if event != "call":
            return
        rel = _relative(code.co_filename)
        if rel is not None:
            walk.files.add(rel)
        if code in registered:
            add(frame)
            objective.setdefault(rel or code.co_filename)
        elif not stepped[0] and _is_optimizer_step(code):
            stepped[0] = True
            add(frame)
        elif not scored[0] and _is_training_forward(code):
            scored[0] = True
            add(frame)

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    walk.objective = list(objective)
    return walk


def _first_unit(trainer):
    from comlrl.core import loop
    from comlrl.core.logging.reporting import open_run_log

    trainer.get_train_dataloader()
    open_run_log(trainer)
    trainer.run_state.start_call()
    units = trainer.prepare(0)
    if units is None:
        return loop.materialize(trainer, loop.item_units(trainer)[0])
    return units[0]


def _magrpo(out: Path):
    from tests.reinforce.helpers import make_trainer

    return make_trainer(out, rollout_buffer_size=2, num_train_epochs=1)


def _iac(out: Path):
    from tests.ac.helpers import make_iac

    return make_iac(out, rollout_buffer_size=2, num_train_epochs=1)


def _madpo(out: Path):
    from comlrl.pbrl import MADPOConfig, MADPOTrainer
    from tests.pbrl.helpers import FAST, PROMPTS, ratio_reward, two_agents

    agents, tok = two_agents()
    config = MADPOConfig(
        **FAST,
        preference_num_candidates=3,
        preference_pairs_per_sample=2,
        train_batch_size=2,
        num_train_epochs=1,
        output_dir=str(out / "run"),
    )
    return MADPOTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=ratio_reward,
        args=config,
    )


STEPS = {"MAGRPO": _magrpo, "IAC": _iac, "MADPO": _madpo}


def walks() -> list[Walk]:
    """The walk of one step of each family's trainer on the tiny test models."""
    sys.path.insert(0, str(ROOT))
    from comlrl.core import loop

    out = []
    for name, build in STEPS.items():
        with tempfile.TemporaryDirectory() as tmp:
            trainer = build(Path(tmp))
            unit = _first_unit(trainer)
            walk = trace(name, lambda t=trainer, u=unit: loop.run_unit(t, u))
            if not trainer.run_state.agent_steps:
                raise RuntimeError(f"{name}: the traced unit took no optimizer step.")
            out.append(walk)
    return out


def hops_table(w: Walk) -> list[str]:
    """One walk's hops as a markdown table, then its objective files."""
    lines = ["| # | file | function | indirection |", "|---|---|---|---|"]
    for i, hop in enumerate(w.hops, 1):
        lines.append(f"| {i} | `{hop.file}` | `{hop.function}` | {hop.via or ''} |")
    return lines + ["", "Objective files: " + ", ".join(f"`{f}`" for f in w.objective) + "."]


def render(results: list[Walk]) -> str:
    """The walk section of docs/architecture.md: every family's counts, the first one's hops."""
    lines = [START, ""]
    lines.append(
        "| step | hops | files on the walk | indirections | objective files | files in the trace |"
    )
    lines.append("|---|---|---|---|---|---|")
    for w in results:
        lines.append(
            f"| {w.name} | {len(w.hops)} | {len(w.walk_files)} | {w.indirections} | "
            f"{len(w.objective)} | {len(w.files)} |"
        )
    lines += ["", f"{results[0].name}'s hops:", ""] + hops_table(results[0])
    lines += ["", END]
    return "\n".join(lines) + "\n"


def updated(text: str, section: str) -> str:
    """``text`` with its walk section replaced by ``section``."""
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END) + "\n", re.S)
    if not pattern.search(text):
        raise ValueError(f"{DOC} has no walk section ({START} ... {END}).")
    return pattern.sub(lambda _: section, text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.walk", description=__doc__)
    p.add_argument("--check", action="store_true", help="exit 1 when docs/architecture.md is stale")
    p.add_argument("--print", action="store_true", help="print every family's hops; write nothing")
    args = p.parse_args(argv)
    results = walks()
    if args.print:
        for w in results:
            print("\n".join([f"## {w.name}", "", *hops_table(w), ""]))
        return 0
    text = DOC.read_text()
    new = updated(text, render(results))
    if args.check:
        return 0 if new == text else 1
    DOC.write_text(new)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
