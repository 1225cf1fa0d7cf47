"""Per-agent instructions for tool use (our own wording)."""

from __future__ import annotations

import json
from collections.abc import Callable

ROLE_MODES = ("self_select", "split_by_order")


def call_instruction(agent: int, num_agents: int, role_mode: str) -> Callable[[dict], str]:
    """The instruction writer of ``agent`` under ``role_mode``."""

    def render(item: dict) -> str:
        schemas = json.dumps(item["functions"], indent=1)
        if role_mode == "split_by_order":
            share = (
                f"List the calls the request needs in the order it mentions them. You take "
                f"call number {agent + 1}, {agent + 1 + num_agents}, {agent + 1 + 2 * num_agents} "
                "and so on; your teammates take the rest."
            )
        else:
            share = (
                "Choose which of the needed calls you make, so that together the team makes "
                "every call exactly once and the work is shared evenly. You cannot see your "
                "teammates' answers."
            )
        return (
            f"You are agent {agent + 1} of {num_agents} answering one request with function "
            f"calls.\n\nAvailable functions:\n{schemas}\n\nRequest:\n{item['prompt'].strip()}\n\n"
            f"{share}\nAnswer with a JSON list only, for example "
            '[{"name": "function_name", "arguments": {"param": "value"}}]. '
            "Answer [] if you make no call."
        )

    return render
