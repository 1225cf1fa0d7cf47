"""Per-agent instructions for code completion (our own wording)."""

from __future__ import annotations

from collections.abc import Callable


def method_instruction(agent: int) -> Callable[[dict], str]:
    """The instruction writer for ``agent``: the skeleton plus that agent's methods."""

    def render(item: dict) -> str:
        mine = item["assignment"][agent]
        others = [n for a, names in enumerate(item["assignment"]) if a != agent for n in names]
        listed = ", ".join(f"`{n}`" for n in mine) or "(none)"
        return (
            f"Your team is completing the Python class `{item['class_name']}`. Here is its "
            f"skeleton:\n\n{item['skeleton'].rstrip()}\n\n"
            f"You implement these methods: {listed}. Teammates write the others"
            + (f" ({', '.join(others)})" if others else "")
            + ", so do not write those.\n"
            "Output only your method definitions, as they appear inside the class "
            "(`def name(self, ...):` with full bodies). No class line, no tests, no markdown."
        )

    return render
