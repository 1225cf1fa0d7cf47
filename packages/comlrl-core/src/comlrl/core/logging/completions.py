"""What the agents wrote: sampled completions in ``completions.jsonl`` (and a W&B table).

With ``log_completions: n`` (n > 0), every training log record is followed by up to ``n`` rows
taken evenly from the latest collected batch, one JSON object per line:

- REINFORCE and actor-critic families, one row per joint action:
  ``{"step", "record", "turn", "prompts": [per agent], "completions": [per agent], "reward",
  "advantages": [per agent]}``;
- preference family, one row per pair:
  ``{"step", "record", "prompts", "chosen": [per agent], "rejected": [per agent],
  "chosen_reward", "rejected_reward"}``.

``record`` is the index of the metrics record the rows belong to (0-based line of
``metrics.jsonl``). A resumed run drops the rows of records its checkpoint did not keep, so the
file continues without duplicates; a fresh run moves an earlier run's file aside. Rows are
appended with one ``write`` each batch and flushed, so a crash can cut at most the last line,
which readers skip.

A family offers rows while it collects (:meth:`comlrl.core.logging.reporting.Reporting.offer_completions`);
the trainer's reporting writes them at the next training log record.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COMPLETIONS_FILE = "completions.jsonl"
# What ``log_completions: true`` means.
DEFAULT_ROWS = 4


def check_log_completions(name: str, value: Any) -> int:
    """``log_completions`` as a row count: an int >= 0, or a bool (true: 4 rows, false: 0)."""
    if isinstance(value, bool):
        return DEFAULT_ROWS if value else 0
    if isinstance(value, int) and value >= 0:
        return value
    raise ValueError(
        f"{name} must be a number of rows per logging step (an int >= 0; 0 turns it off) or "
        f"true/false (true logs {DEFAULT_ROWS}), got {value!r}."
    )


def spread(rows: Sequence[Any], count: int) -> list[Any]:
    """Up to ``count`` of ``rows``, evenly spaced and in order (no RNG is drawn, so logging
    never changes a run's trajectory)."""
    if count <= 0 or not rows:
        return []
    if len(rows) <= count:
        return list(rows)
    step = len(rows) / count
    return [rows[int(i * step)] for i in range(count)]


def _number(value: Any) -> Any:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else str(value)


def tree_rows(nodes: Sequence[Any], advantages: Sequence[Sequence[Sequence[float]]] | None = None):
    """Rows of rollout-tree nodes, one per joint action: each agent's prompt and completion,
    the joint reward, and, with ``advantages[agent][node][k]`` (agent's k-th completion at the
    node), each agent's advantage."""
    rows = []
    for j, node in enumerate(nodes):
        n_agents = len(node.samples)
        for a, action in enumerate(node.joint_actions):
            row = {
                "turn": int(node.turn) + 1,
                "prompts": list(node.prompts),
                "completions": [node.samples[i].texts[action[i]] for i in range(n_agents)],
                "reward": _number(node.rewards[a]),
            }
            if advantages is not None:
                row["advantages"] = [_number(advantages[i][j][action[i]]) for i in range(n_agents)]
            rows.append(row)
    return rows


def sample_rows(per_agent: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Rows of per-agent sample lists aligned by position (the j-th sample of every agent
    belongs to one joint action); samples carry ``prompt``, ``completion``, ``reward``,
    ``advantage`` and ``turn_idx``."""
    rows = []
    for group in zip(*per_agent):
        rows.append(
            {
                "turn": int(group[0].turn_idx) + 1,
                "prompts": [s.prompt for s in group],
                "completions": [s.completion for s in group],
                "reward": _number(group[0].reward),
                "advantages": [_number(s.advantage) for s in group],
            }
        )
    return rows


def table_columns(rows: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Rows flattened for a table: a list value becomes one column per entry (``prompts_0``,
    ``completions_1``, ...); returns (columns, data)."""
    flat = []
    for row in rows:
        out: dict[str, Any] = {}
        for key, value in row.items():
            if isinstance(value, list):
                out.update({f"{key}_{i}": v for i, v in enumerate(value)})
            else:
                out[key] = value
        flat.append(out)
    columns = list(dict.fromkeys(k for row in flat for k in row))
    return columns, [[row.get(c) for c in columns] for row in flat]


class CompletionsLog:
    """``completions.jsonl`` of one run dir."""

    def __init__(self, run_dir: str | os.PathLike):
        self.path = Path(run_dir) / COMPLETIONS_FILE

    def rows(self) -> list[dict[str, Any]]:
        """Every complete row of the file (a line cut short by a crash ends the list)."""
        if not self.path.exists():
            return []
        out = []
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    break
        return out

    def append(self, rows: Sequence[dict[str, Any]], step: int, record: int) -> None:
        """Append ``rows`` tagged with ``step`` and the metrics ``record`` index."""
        if not rows:
            return
        text = "".join(
            json.dumps({"step": int(step), "record": int(record), **row}) + "\n" for row in rows
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()

    def truncate(self, records: int) -> None:
        """Keep the rows of the first ``records`` metrics records (a resume redoes the rest)."""
        if not self.path.exists():
            return
        kept = [r for r in self.rows() if int(r.get("record", -1)) < records]
        tmp = self.path.with_suffix(".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in kept))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def set_aside(self) -> str | None:
        """Move an earlier run's file to ``completions.old-<n>.jsonl``; returns the new name
        (None when there was no file)."""
        if not self.path.exists():
            return None
        n = 1
        while (old := self.path.with_name(f"{self.path.stem}.old-{n}.jsonl")).exists():
            n += 1
        os.replace(self.path, old)
        return str(old)


def log_completions_table(sink: Any, rows: Sequence[dict[str, Any]], step: int) -> None:
    """Log ``rows`` as a table under ``completions`` at ``step`` through ``sink.log_table(key,
    columns, data, step)`` (W&B makes a ``wandb.Table`` of it, TensorBoard a text table)."""
    columns, data = table_columns(rows)
    sink.log_table("completions", columns, data, step)
