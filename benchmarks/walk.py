"""The walk of one training step, file by file: ``python -m benchmarks.walk`` writes
docs/architecture.md's walk section; ``tests/benchmarks/test_walk.py`` fails when it is stale.

A *step* is one unit of the shared loop that ends in an update (``trainer.run_unit(unit)``):
MAGRPO rolls out one batch of items and updates on the full buffer, IAC the same with its
critics, MADPO takes one DPO update on a batch of already sampled pairs (its stage's pair
sampling runs before, in ``prepare``). The walk records, with ``sys.setprofile``, every file of
the comlrl packages whose functions the step calls, in the order they are first entered, with
the first function entered there; a *crossing* is a distinct caller-file → callee-file edge
between core and a family. Numbers of calls are left out: they follow the sampled lengths, which
differ between machines.
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

    def count(self, layer: str) -> int:
        return sum(1 for f in self.files if _layer(f) == layer)


def _relative(path: str) -> str | None:
    if not path.startswith(_PACKAGES) or "/src/comlrl/" not in path:
        return None
    return path.split("/src/", 1)[1]


def _layer(rel: str) -> str:
    return "core" if rel.startswith("comlrl/core/") else "family"


def trace(name: str, step: Callable[[], None]) -> Walk:
    """Run ``step`` under a profiler and return its :class:`Walk`."""
    walk = Walk(name)

    def profile(frame, event, arg):
        if event != "call":
            return
        rel = _relative(frame.f_code.co_filename)
        if rel is None:
            return
        walk.files.setdefault(rel, frame.f_code.co_name)
        caller = frame.f_back
        while caller is not None and _relative(caller.f_code.co_filename) is None:
            caller = caller.f_back
        if caller is not None:
            src = _relative(caller.f_code.co_filename)
            if src != rel and _layer(src) != _layer(rel):
                walk.crossings.add((src, rel))

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return walk


def _first_unit(trainer):
    from comlrl.core import loop

    trainer.get_train_dataloader()
    trainer.reporting.ensure_logger()
    trainer.cursor, trainer.global_batch, trainer.epoch = (0, 0), 0, 0
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
    out = []
    for name, build in STEPS.items():
        with tempfile.TemporaryDirectory() as tmp:
            trainer = build(Path(tmp))
            unit = _first_unit(trainer)
            walk = trace(name, lambda t=trainer, u=unit: t.run_unit(u))
            if not getattr(trainer, "agent_steps", None):
                raise RuntimeError(f"{name}: the traced unit took no optimizer step.")
            out.append(walk)
    return out


def render(results: list[Walk]) -> str:
    """The walk section of docs/architecture.md."""
    lines = [START, ""]
    lines.append("| step | files | core | family | core↔family crossings |")
    lines.append("|---|---|---|---|---|")
    for w in results:
        lines.append(
            f"| {w.name} | {len(w.files)} | {w.count('core')} | {w.count('family')} | "
            f"{len(w.crossings)} |"
        )
    for w in results:
        lines += ["", f"### {w.name}", "", "| # | file | first function entered |", "|---|---|---|"]
        for i, (path, fn) in enumerate(w.files.items(), 1):
            where = "" if _layer(path) == "core" else " (family)"
            lines.append(f"| {i} | `{path}`{where} | `{fn}` |")
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
