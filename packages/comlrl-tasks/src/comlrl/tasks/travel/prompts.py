"""Per-agent instructions for travel planning (our own wording)."""

from __future__ import annotations

from collections.abc import Callable

from comlrl.tasks.travel.plan import AGENT0_FIELDS, AGENT1_FIELDS


def _duties(agent: int, days: int) -> str:
    fields = AGENT0_FIELDS if agent == 0 else AGENT1_FIELDS
    dinner_days = [d for d in range(1, days + 1) if (d % 2 == 0) == (agent == 0)]
    text = ", ".join(fields) + " for every day"
    if dinner_days:
        text += ", and dinner on day " + ", ".join(str(d) for d in dinner_days)
    return text


def plan_instruction(agent: int) -> Callable[[dict], str]:
    """The instruction writer of travel agent ``agent`` (0 or 1)."""

    def render(item: dict) -> str:
        reference = item.get("reference_information") or ""
        context = f"\nReference information:\n{reference.strip()}\n" if reference.strip() else ""
        return (
            f"You are planner {agent} in a team of two building a {item['days']}-day travel "
            f"plan.\n\nRequest:\n{item['prompt'].strip()}\n{context}\n"
            f"You fill these slots: {_duties(agent, item['days'])}. Your teammate fills the "
            "rest, so leave those alone.\n"
            'Reply with strict JSON only: {"agent_id": ' + str(agent) + ', "assignments": '
            '[{"day": 1, "field": "current_city", "value": "..."}]}. Use "-" as the value of a '
            "slot that should stay empty (for example no lodging on the last day)."
        )

    return render
