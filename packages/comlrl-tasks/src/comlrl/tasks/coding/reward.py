"""The leveled execution reward of the coding task (range [0, 4.5]).

Levels, each reached only when the one before passed:
  gate  both completions define a function and contain a ``return``, else 0;
  L1    +0.4 when ``aux`` is defined, +0.6 when the entry point is defined (stop without it);
  L2    +0.5 when imports (+ the prompt's helpers) + aux + main parse (stop on a syntax
        error; a completion too deeply nested to parse is one);
  L3    + passed/total of the problem's asserts, run in the sandbox;
  gate  when some test passed but main does not call aux, the total is capped at 2.0;
  L4    when some test passed and main calls aux: +1.0, and +1.0 more unless main is a thin
        wrapper around aux.
Penalties after execution: -0.5 when every aux call's result is discarded, -0.2 when a time
limit fired. A run the sandbox stops passes no test: the reward is then 1.5 (1.3 after a
timeout) for a pair with both functions and valid syntax. A sample that breaks the sandbox
itself (see ``ExecResult.fault``) scores the same and is counted in ``sandbox_fault`` and
``fault_<reason>``.
"""

from __future__ import annotations

from dataclasses import dataclass

from comlrl.tasks.coding.analysis import HELPER, AuxUsage, aux_usage
from comlrl.tasks.coding.tests import slice_tests, test_snippets
from comlrl.tasks.common.code_text import (
    defines_function,
    describe_syntax_error,
    extract_code,
    has_any_function_with_return,
    import_lines,
    prompt_context,
    syntax_error,
)
from comlrl.tasks.sandbox import ExecJob, ExecResult, SandboxPool
from comlrl.tasks.sandbox.jobs import fault_metrics

AUX_DEFINED, MAIN_DEFINED, SYNTAX_OK = 0.4, 0.6, 0.5
GATE_CAP, COLLAB_BONUS, NOT_THIN_BONUS = 2.0, 1.0, 1.0
IGNORED_PENALTY, TIMEOUT_PENALTY = 0.5, 0.2
CODING_MAX = AUX_DEFINED + MAIN_DEFINED + SYNTAX_OK + 1.0 + COLLAB_BONUS + NOT_THIN_BONUS


@dataclass
class Prepared:
    """Static results of one joint sample and the sandbox job it still needs (if any)."""

    out: dict
    job: ExecJob | None
    usage: AuxUsage
    syntax_message: str = ""


def _empty() -> dict:
    keys = (
        "format_ok",
        "aux_defined",
        "main_defined",
        "syntax_ok",
        "tests_passed",
        "tests_total",
        "pass_rate",
        "aux_called",
        "aux_ignored",
        "thin_wrapper",
        "timed_out",
        "level1",
        "level2",
        "level3",
        "level4",
        "penalty",
        "total",
    )
    return {**dict.fromkeys(keys, 0.0), **fault_metrics(None)}


def combine(item: dict, aux_code: str, main_code: str) -> str:
    """The program the tests run against: the prompt's imports (and its helper definitions,
    when it has any), then aux, then main."""
    head = prompt_context(item["prompt"], item["entry_point"]) or import_lines(item["prompt"])
    parts = [head, aux_code, main_code]
    return "\n\n".join(p for p in parts if p.strip()) + "\n"


class CodingScorer:
    """Scores (aux, main) completion pairs; execution runs in parallel on a sandbox pool."""

    def __init__(self, pool: SandboxPool, test_limit: int | None = None):
        self.pool = pool
        self.test_limit = test_limit

    def prepare(
        self, aux_text: str, main_text: str, item: dict, test_limit: int | None = None
    ) -> Prepared:
        """Run the static levels and build the sandbox job for L3 when it is reached."""
        out = _empty()
        aux_code, main_code = extract_code(aux_text), extract_code(main_text)
        entry = item["entry_point"]
        usage = aux_usage(main_code, entry)
        out["aux_defined"] = float(defines_function(aux_code, HELPER))
        out["main_defined"] = float(defines_function(main_code, entry))
        if not (has_any_function_with_return(aux_code) and has_any_function_with_return(main_code)):
            return Prepared(out, None, usage)
        out["format_ok"] = 1.0
        out["level1"] = AUX_DEFINED * out["aux_defined"] + MAIN_DEFINED * out["main_defined"]
        if not out["main_defined"]:
            return Prepared(out, None, usage)
        program = combine(item, aux_code, main_code)
        error = syntax_error(program)
        if error is not None:
            return Prepared(out, None, usage, describe_syntax_error(error))
        out["syntax_ok"], out["level2"] = 1.0, SYNTAX_OK
        tests = slice_tests(test_snippets(item["test"], entry), test_limit)
        out["tests_total"] = float(sum(1 for t in tests if t.counts))
        # The prompt's helpers also run in the judge: the tests call those, not the sample's.
        context = prompt_context(item["prompt"], entry)
        job = ExecJob(setup=program, tests=tuple(tests), entry_point=entry, context=context)
        return Prepared(out, job, usage)

    @staticmethod
    def finish(prepared: Prepared, result: ExecResult | None) -> dict:
        """Add the execution levels, the aux gate and the penalties; set ``total``."""
        out, usage = prepared.out, prepared.usage
        if result is not None:
            passed = result.passed if result.status == "ok" else 0
            timed_out = result.timed_out or result.setup_error_type == "Timeout"
            total_tests = out["tests_total"] or 1.0
            out["tests_passed"], out["pass_rate"] = float(passed), passed / total_tests
            out["level3"], out["timed_out"] = out["pass_rate"], float(timed_out)
            out["aux_called"], out["aux_ignored"] = float(usage.called), float(usage.result_ignored)
            out["thin_wrapper"] = float(usage.thin_wrapper)
            out.update(fault_metrics(result))
            collaborating = bool(out["aux_defined"]) and usage.called
            if passed > 0 and collaborating:
                out["level4"] = COLLAB_BONUS + (0.0 if usage.thin_wrapper else NOT_THIN_BONUS)
            penalty = IGNORED_PENALTY if usage.called and usage.result_ignored else 0.0
            penalty += TIMEOUT_PENALTY if timed_out else 0.0
            out["penalty"] = -penalty
            subtotal = out["level1"] + out["level2"] + out["level3"] + out["level4"]
            if passed > 0 and not collaborating:
                subtotal = min(subtotal, GATE_CAP)
            out["total"] = subtotal - penalty
        else:
            out["total"] = out["level1"] + out["level2"]
        return out

    def details(
        self,
        aux_texts: list[str],
        main_texts: list[str],
        items: list[dict],
        test_limit: int | None = None,
    ) -> tuple[list[dict], list[Prepared], list]:
        """Breakdowns plus the prepared samples and sandbox results (used by feedback)."""
        prepared = [
            self.prepare(a, m, item, test_limit) for a, m, item in zip(aux_texts, main_texts, items)
        ]
        results = self.pool.run_many([p.job for p in prepared])
        return [self.finish(p, r) for p, r in zip(prepared, results)], prepared, results

    def __call__(self, columns: list[list[str]], items: list[dict]) -> list[dict]:
        return self.details(columns[0], columns[1], items, self.test_limit)[0]
