"""Multi-turn transitions of the coding task: ``plain`` and ``level_feedback``."""

from __future__ import annotations

from comlrl.tasks.coding.analysis import HELPER
from comlrl.tasks.coding.prompts import aux_instruction, main_instruction
from comlrl.tasks.coding.reward import CodingScorer
from comlrl.tasks.common.code_text import extract_code
from comlrl.tasks.common.lookup import ItemIndex
from comlrl.tasks.common.transitions import make_transition
from comlrl.tasks.sandbox._verdict import text as bounded_text

_MAX_FAILURES = 5
# A feedback prompt stays far under 1 MB whatever the sample sent or raised: its previous code
# and each diagnostic line are cut (and made valid UTF-8, which a tokenizer needs).
_MAX_CODE_CHARS = 100_000
_MAX_LINE_CHARS = 1_000


def _closing(name: str) -> str:
    return (
        f"Revise your `{name}(...)` function accordingly. Output only the function code, "
        "with no markdown and no explanations."
    )


def _compose(instruction: str, previous: str, sections: list[str], name: str, options: dict) -> str:
    parts = [instruction] if options.get("original_prompt", True) else []
    if options.get("previous_response", True):
        code = bounded_text(extract_code(previous) or "(empty)", _MAX_CODE_CHARS)
        parts.append(f"Your previous code:\n{code}")
    parts += [bounded_text(section, _MAX_LINE_CHARS * 40) for section in sections]
    parts.append(_closing(name))
    return "\n\n".join(parts)


def diagnostics(
    scorer: CodingScorer, item: dict, aux_text: str, main_text: str, test_limit: int | None
) -> tuple[list[str], list[str]]:
    """Static and execution findings, as (shared lines, main-only lines)."""
    rows, prepared, results = scorer.details([aux_text], [main_text], [item], test_limit)
    row, prep, result = rows[0], prepared[0], results[0]
    entry = item["entry_point"]
    found = {True: "FOUND", False: "MISSING"}
    shared = [
        "Static checks:",
        f"- helper definition `def {HELPER}(...)`: {found[bool(row['aux_defined'])]}",
        f"- main definition `def {entry}(...)`: {found[bool(row['main_defined'])]}",
    ]
    if not row["format_ok"]:
        shared.append("- format: each answer must be a function definition with a return statement")
    if prep.syntax_message:
        shared.append(f"- syntax: ERROR at {prep.syntax_message}")
    elif row["syntax_ok"]:
        shared.append("- syntax: OK")
    if result is not None:
        shared.append(f"Tests: {int(row['tests_passed'])}/{int(row['tests_total'])} passed")
        if result.status == "setup_error":
            line = f"- the code failed before the tests ran: {result.setup_error_type}: "
            shared.append(bounded_text(line + f"{result.setup_error}", _MAX_LINE_CHARS))
        elif result.status in ("killed", "crashed"):
            shared.append("- the run was stopped by the sandbox (time or memory limit)")
        failing = [t for t in result.tests if not t.passed]
        for outcome in failing[:_MAX_FAILURES]:
            detail = f"{outcome.error_type}: {outcome.message}" if outcome.error_type else "failed"
            shared.append(bounded_text(f"- FAILED `{outcome.name}` -> {detail}", _MAX_LINE_CHARS))
        if len(failing) > _MAX_FAILURES:
            shared.append(f"- ... and {len(failing) - _MAX_FAILURES} more failing tests")
    main_only = []
    if row["main_defined"]:
        if not prep.usage.called:
            main_only.append(f"- aux usage: `{entry}` never calls `{HELPER}(...)`")
        elif prep.usage.result_ignored:
            main_only.append(f"- aux usage: `{HELPER}(...)` is called but its result is ignored")
        else:
            main_only.append(f"- aux usage: `{HELPER}(...)` is called and its result used")
        if prep.usage.thin_wrapper:
            main_only.append(f"- warning: `{entry}` only wraps `{HELPER}`; do real work in it too")
    return shared, main_only


def make_coding_transition(mode: str, scorer: CodingScorer, index: ItemIndex, options: dict):
    """The ``plain`` or ``level_feedback`` transition for (aux, main) agents.

    ``options`` keys: ``original_prompt`` and ``previous_response`` (include the task text and
    the agent's last code; default true) and ``test_slice`` (how many asserts the feedback run
    uses: a positive n takes the first n, a negative n the last -n, null or 0 all of them).
    """

    def build(item, completions, _prompt_history, _response_history):
        aux_text, main_text = completions
        entry = item["entry_point"]
        if mode == "plain":
            return [
                _compose(aux_instruction(item), aux_text, [], HELPER, options),
                _compose(main_instruction(item), main_text, [], entry, options),
            ]
        shared, main_only = diagnostics(
            scorer, item, aux_text, main_text, options.get("test_slice")
        )
        return [
            _compose(aux_instruction(item), aux_text, ["\n".join(shared)], HELPER, options),
            _compose(
                main_instruction(item), main_text, ["\n".join(shared + main_only)], entry, options
            ),
        ]

    return make_transition(build, index=index, num_agents=2, name=f"coding_{mode}")
