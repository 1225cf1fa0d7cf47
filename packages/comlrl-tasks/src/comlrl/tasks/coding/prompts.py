"""Instructions for the helper agent and the main agent (our own wording)."""

from __future__ import annotations

from comlrl.tasks.coding.data import signature_line


def aux_instruction(item: dict) -> str:
    """Agent 0: write a helper function ``aux`` for the problem."""
    entry = item["entry_point"]
    return (
        "You are the helper in a two-person coding team. Write one helper function named "
        f"`aux` that your teammate can call while implementing `{entry}`.\n\n"
        f"Problem:\n{item['prompt'].rstrip()}\n\n"
        "Rules:\n"
        "- Output only Python code: no markdown, no explanations, no tests or example calls.\n"
        "- Define exactly one function, `def aux(...):`, and make it return a useful result "
        "(for example a cleaned-up input, a lookup table or a sub-computation).\n"
        f"- Do not implement `{entry}` yourself."
    )


def main_instruction(item: dict) -> str:
    """Agent 1: implement the entry point, calling the teammate's ``aux``."""
    entry = item["entry_point"]
    signature = signature_line(item["prompt"], entry)
    return (
        f"You are the lead in a two-person coding team. Implement `{entry}` for the problem "
        "below. Your teammate supplies a helper function `aux(...)`; you cannot see its code, "
        "but you can call it and use what it returns.\n\n"
        f"Problem:\n{item['prompt'].rstrip()}\n\n"
        "Rules:\n"
        "- Output only Python code: no markdown, no explanations, no tests.\n"
        f"- Define `{signature}` and nothing else; do not define `aux`.\n"
        "- Call `aux(...)` where it helps and use its return value, for example "
        "`helper_result = aux(...)`."
    )
