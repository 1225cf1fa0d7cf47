"""A short console table of sampled eval completions, printed above the progress bar.

``comlrl train`` prints one after each evaluation (``output.console_completions`` rows; 0 turns
it off), as TRL's ``log_completions`` does: a glance at what the agents write, without opening
``metrics.jsonl``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

# Characters of one completion shown in a cell; longer texts end in "...".
CELL_WIDTH = 48


def _clip(text: Any, width: int) -> str:
    flat = " ".join(str(text).split())  # newlines and runs of spaces would break the columns
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _reward(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else str(value)


def completions_table(episodes: Sequence[Sequence[dict[str, Any]]], step: int) -> str:
    """A text table of eval ``episodes`` (each a list of turn rows with ``turn``, ``reward``
    and per-agent ``completions``): one line per item and turn, one column per agent."""
    n_agents = max((len(r["completions"]) for ep in episodes for r in ep), default=0)
    header = ["item", "turn", "reward", *(f"agent {i}" for i in range(n_agents))]
    body = [
        [
            str(item),
            str(row["turn"]),
            _reward(row["reward"]),
            *(_clip(t, CELL_WIDTH) for t in row["completions"]),
        ]
        for item, episode in enumerate(episodes)
        for row in episode
    ]
    widths = [max(len(r[c]) for r in [header, *body] if c < len(r)) for c in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(widths[c]) for c, cell in enumerate(cells)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([f"eval completions at env step {step}:", line(header), rule]) + "".join(
        "\n" + line(r) for r in body
    )


def print_completions_table(episodes: Sequence[Sequence[dict[str, Any]]], step: int) -> None:
    """Print :func:`completions_table` above the progress bar (nothing when empty)."""
    if not episodes:
        return
    from tqdm.auto import tqdm

    tqdm.write(completions_table(episodes, step), file=sys.stdout)
