"""Append-only JSONL metric log: one JSON object per logged step."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


class JsonlSink:
    """Writes ``{"step": s, **metrics}`` lines to ``path``; flushed per line so a crash loses
    nothing already logged. ``truncate(count)`` drops lines past a resume point."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.count = len(_complete_lines(self.path))
        self._fh = open(self.path, "a", encoding="utf-8")

    def write(self, metrics: dict[str, Any], step: int) -> None:
        """Append one record."""
        record = {"step": int(step)}
        record.update({k: _jsonable(v) for k, v in metrics.items()})
        self._fh.write(json.dumps(record) + "\n")
        self._fh.flush()
        self.count += 1

    def truncate(self, count: int) -> None:
        """Keep the first ``count`` records; later ones belong to work a resume will redo."""
        self._fh.close()
        kept = _complete_lines(self.path)[:count]
        tmp = self.path.with_suffix(".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("".join(k + "\n" for k in kept))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self.count = len(kept)
        self._fh = open(self.path, "a", encoding="utf-8")

    def set_aside(self) -> str:
        """Move the file to ``<stem>.old-<n>.jsonl`` (the first free n) and start an empty one;
        returns the new name of the old file."""
        self._fh.close()
        n = 1
        while (old := self.path.with_name(f"{self.path.stem}.old-{n}{self.path.suffix}")).exists():
            n += 1
        os.replace(self.path, old)
        self.count = 0
        self._fh = open(self.path, "a", encoding="utf-8")
        return str(old)

    def close(self) -> None:
        """Close the file."""
        if not self._fh.closed:
            self._fh.close()


def _complete_lines(path: Path) -> list[str]:
    """Records of a JSONL file, stopping at a line cut short by a crash mid-write."""
    if not path.exists():
        return []
    lines = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                json.loads(line)
            except json.JSONDecodeError:
                break
            lines.append(line)
    return lines


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All records of a metrics JSONL file."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
