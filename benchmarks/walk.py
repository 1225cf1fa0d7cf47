"""The walk of one training step, file by file: ``python -m benchmarks.walk`` writes
docs/architecture.md's walk section; ``tests/benchmarks/test_walk.py`` fails when it is stale.

A *step* is one unit of the shared loop that ends in an update (``loop.run_unit(trainer, unit)``):
MAGRPO rolls out one batch of items and updates on the full buffer, IAC the same with its
critics, MADPO takes one DPO update on a batch of already sampled pairs (its stage's pair
sampling runs before, in ``prepare``). The trace records, with ``sys.setprofile``, every file of
the comlrl packages whose functions the step calls, in the order they are first entered, with
the first function entered there.

The *walk* is the step as its reader follows it: the loop's spine (``core/trainer.py``,
``core/loop/walk.py``), every family file the step enters, and each core file that one of those
calls directly (a stage: the rollout record, the policy update, the buffer, ...). What a stage
does inside core (the decoder, the log-prob kernels, the optimizer step, the sinks) is listed
under the stage that entered it, so every file of the trace is still shown. A *crossing* is a
distinct caller-file → callee-file edge between core and a family, counted over the whole
trace. Numbers of calls are left out: they follow the sampled lengths, which differ between
machines.
"""

from __future__ import annotations

import argparse
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


@dataclass
class Walk:
    """What one step touched: files in first-entry order with their first function, and the
    distinct core↔family call edges."""

    name: str
    files: dict[str, str] = field(default_factory=dict)
    crossings: set[tuple[str, str]] = field(default_factory=set)
    # file -> the walk file whose stage entered it (absent: the file is on the walk)
    inside: dict[str, str] = field(default_factory=dict)

    def count(self, layer: str) -> int:
        return sum(1 for f in self.walk if _layer(f) == layer)

    @property
    def walk(self) -> list[str]:
        """The files on the walk, in first-entry order."""
        return [f for f in self.files if f not in self.inside]


def _relative(path: str) -> str | None:
    if not path.startswith(_PACKAGES) or "/src/comlrl/" not in path:
        return None
    return path.split("/src/", 1)[1]


def _layer(rel: str) -> str:
    return "core" if rel.startswith("comlrl/core/") else "family"


SPINE = ("comlrl/core/trainer.py", "comlrl/core/loop/walk.py")


def _follows(rel: str) -> bool:
    """Whether the reader reads on from ``rel``: the loop's spine and the family's code."""
    return rel in SPINE or _layer(rel) == "family"


def _stage_of(chain: list[str]) -> str | None:
    """The walk file whose stage the innermost file of ``chain`` (outermost first) runs in:
    the last core file called directly from a followed file; None when the innermost file is
    itself on the walk."""
    entry = None
    for i, rel in enumerate(chain):
        if _follows(rel):
            entry = None
        elif i > 0 and _follows(chain[i - 1]):
            entry = rel
    return None if entry == chain[-1] or _follows(chain[-1]) else entry


def _chain(frame) -> list[str]:
    """The package files on ``frame``'s stack, outermost first, repeats of one file merged."""
    out: list[str] = []
    while frame is not None:
        rel = _relative(frame.f_code.co_filename)
        if rel is not None and (not out or out[-1] != rel):
            out.append(rel)
        frame = frame.f_back
    return out[::-1]


def trace(name: str, step: Callable[[], None]) -> Walk:
    """Run ``step`` under a profiler and return its :class:`Walk`."""
    walk = Walk(name)

    direct: set[str] = set()  # files some followed file (or the spine) calls directly

    def profile(frame, event, arg):
        if event != "call":
            return
        rel = _relative(frame.f_code.co_filename)
        if rel is None:
            return
        caller = frame.f_back
        while caller is not None and _relative(caller.f_code.co_filename) is None:
            caller = caller.f_back
        src = _relative(caller.f_code.co_filename) if caller is not None else None
        if rel not in walk.files:
            walk.files[rel] = frame.f_code.co_name
            stage = _stage_of(_chain(frame))
            if stage is not None:
                walk.inside[rel] = stage
        if rel in walk.inside and rel not in direct and (src is None or _follows(src)):
            direct.add(rel)
            del walk.inside[rel]
        if src is not None and src != rel and _layer(src) != _layer(rel):
            walk.crossings.add((src, rel))

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    for rel, stage in walk.inside.items():
        seen = {rel}
        while stage in walk.inside and stage not in seen:  # a stage entered inside another
            seen.add(stage)
            stage = walk.inside[stage]
        walk.inside[rel] = stage
    return walk


def _first_unit(trainer):
    from comlrl.core import loop

    trainer.get_train_dataloader()
    trainer.reporting.ensure_logger()
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


def render(results: list[Walk]) -> str:
    """The walk section of docs/architecture.md."""
    lines = [START, ""]
    lines.append(
        "| step | walk files | core | family | core↔family crossings | files in the whole trace |"
    )
    lines.append("|---|---|---|---|---|---|")
    for w in results:
        lines.append(
            f"| {w.name} | {len(w.walk)} | {w.count('core')} | {w.count('family')} | "
            f"{len(w.crossings)} | {len(w.files)} |"
        )
    for w in results:
        lines += ["", f"### {w.name}", ""]
        lines += ["| # | file on the walk | first function entered | inside its stage |"]
        lines += ["|---|---|---|---|"]
        for i, path in enumerate(w.walk, 1):
            where = "" if _layer(path) == "core" else " (family)"
            below = [
                f"`{f.removeprefix('comlrl/core/')}`" for f, s in w.inside.items() if s == path
            ]
            lines.append(f"| {i} | `{path}`{where} | `{w.files[path]}` | {', '.join(below)} |")
        lines += ["", "Crossings (caller → callee):", ""]
        lines += [f"- `{a}` → `{b}`" for a, b in sorted(w.crossings)]
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
    args = p.parse_args(argv)
    text = DOC.read_text()
    new = updated(text, render(walks()))
    if args.check:
        return 0 if new == text else 1
    DOC.write_text(new)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
