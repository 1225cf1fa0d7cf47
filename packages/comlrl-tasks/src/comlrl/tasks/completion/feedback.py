"""Multi-turn transitions of code completion: ``plain`` and ``level_feedback``."""

from __future__ import annotations

from comlrl.tasks.common.code_text import extract_code
from comlrl.tasks.common.lookup import ItemIndex
from comlrl.tasks.common.transitions import make_transition
from comlrl.tasks.completion.prompts import method_instruction
from comlrl.tasks.completion.reward import CompletionScorer

_MAX_FAILURES = 5
_CLOSING = (
    "Revise your methods accordingly. Output only your method definitions, with no "
    "class line and no markdown."
)


def agent_diagnostics(
    scorer: CompletionScorer, item: dict, completions: list[str]
) -> list[list[str]]:
    """Per-agent findings: missing and broken methods, foreign methods, and failing tests."""
    rows, prepared, results = scorer.details([[c] for c in completions], [item])
    row, prep, result = rows[0], prepared[0], results[0]
    shared = []
    if prep.merge_error:
        shared.append(f"- the merged class does not parse: {prep.merge_error}")
    if result is not None:
        shared.append(f"Tests: {int(row['tests_passed'])}/{int(row['tests_total'])} passed")
        if result.status != "ok":
            reason = result.setup_error or "stopped by the sandbox (time or memory limit)"
            shared.append(f"- the merged class failed to run: {reason}")
        failing = [t for t in result.tests if not t.passed]
        for outcome in failing[:_MAX_FAILURES]:
            shared.append(f"- FAILED {outcome.name}: {outcome.error_type}: {outcome.message}")
    per_agent = []
    for agent, found in enumerate(prep.delivered):
        lines = ["Checks of your methods:"]
        for name in item["assignment"][agent]:
            if name in found.methods:
                lines.append(f"- `{name}`: FOUND, syntax OK")
            elif name in found.broken:
                lines.append(f"- `{name}`: syntax ERROR at {found.broken[name]}")
            else:
                lines.append(f"- `{name}`: MISSING")
        if prep.foreign[agent]:
            lines.append(
                "- you also wrote methods owned by teammates: "
                + ", ".join(f"`{n}`" for n in prep.foreign[agent])
                + "; drop them"
            )
        per_agent.append(lines + shared)
    return per_agent


def make_completion_transition(
    mode: str, scorer: CompletionScorer, index: ItemIndex, num_agents: int, options: dict
):
    """``plain`` (previous code + revise) or ``level_feedback`` (adds the checks above)."""
    renders = [method_instruction(a) for a in range(num_agents)]

    def build(item, completions, _prompt_history, _response_history):
        notes = (
            agent_diagnostics(scorer, item, completions)
            if mode == "level_feedback"
            else [[] for _ in completions]
        )
        prompts = []
        for agent, text in enumerate(completions):
            parts = [renders[agent](item)] if options.get("original_prompt", True) else []
            if options.get("previous_response", True):
                parts.append(f"Your previous code:\n{extract_code(text) or '(empty)'}")
            if notes[agent]:
                parts.append("\n".join(notes[agent]))
            parts.append(_CLOSING)
            prompts.append("\n\n".join(parts))
        return prompts

    return make_transition(
        build, index=index, num_agents=num_agents, name=f"code_completion_{mode}"
    )
