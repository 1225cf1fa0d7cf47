"""Find the dataset row behind a prompt, for hooks that receive only prompt text."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence


class ItemIndex:
    """Maps each row's ``prompt`` field, and every agent's rendered prompt, to the row."""

    def __init__(self, rows: Iterable[dict], renders: Sequence[Callable[[dict], str]] = ()):
        self._by_text: dict[str, dict] = {}
        for row in rows:
            self.add(row, renders)

    def add(self, row: dict, renders: Sequence[Callable[[dict], str]] = ()) -> None:
        """Index ``row`` under its prompt and its rendered agent prompts."""
        keys = [row.get("prompt")] + [render(row) for render in renders]
        for key in keys:
            if isinstance(key, str):
                self._by_text.setdefault(key.strip(), row)

    def find(self, prompt: str | None) -> dict | None:
        """The row for ``prompt`` (exact, then as a substring of a chat-wrapped prompt)."""
        if not isinstance(prompt, str):
            return None
        text = prompt.strip()
        if text in self._by_text:
            return self._by_text[text]
        for key, row in self._by_text.items():
            if key and key in text:
                return row
        return None

    def resolve(
        self,
        batch_items: Sequence[dict] | None,
        prompts: Sequence[str] | None,
        count: int,
        caller: str,
    ) -> list[dict]:
        """Rows for ``count`` joint samples from ``batch_items``, else by looking up ``prompts``.

        A single row (or prompt) is broadcast to every joint sample.
        """
        if batch_items is not None:
            items = list(batch_items)
        elif prompts is not None:
            items = []
            for prompt in prompts:
                row = self.find(prompt)
                if row is None:
                    raise ValueError(
                        f"{caller}: no dataset row matches prompt {prompt[:80]!r}; pass "
                        "batch_items=[row per joint sample] instead."
                    )
                items.append(row)
        else:
            raise ValueError(
                f"{caller} needs batch_items (the dataset row of each joint sample) or "
                "prompts to look the rows up."
            )
        if len(items) == 1 and count > 1:
            items = items * count
        if len(items) != count:
            raise ValueError(
                f"{caller}: batch_items has {len(items)} rows for {count} joint samples; "
                "give one row per joint sample (or a single row for all)."
            )
        for row in items:
            if not isinstance(row, dict):
                raise ValueError(
                    f"{caller}: each of batch_items must be a dict row, got {type(row).__name__}."
                )
        return items
