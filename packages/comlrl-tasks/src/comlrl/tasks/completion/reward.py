"""Reward of the code-completion task (range [-1, 6]).

  syntax   [0, 2]: 2 x (methods whose owner delivered a definition that parses) / methods;
  tests    [0, 4]: 4 x the unit-test pass rate of the merged class, run in the sandbox (only the
           owners' methods are merged; other agents' versions are ignored);
  overlap  [-1, 0]: -(methods also written by an agent that does not own them) / methods.
A merged class that the sandbox stops (time, memory) passes no test; one that breaks the sandbox
itself also counts in ``sandbox_fault`` and ``fault_<reason>``.
"""

from __future__ import annotations

from dataclasses import dataclass

from comlrl.tasks.common.code_text import syntax_error
from comlrl.tasks.completion.skeleton import AgentMethods, merge, parse_agent_methods
from comlrl.tasks.sandbox import ExecJob, ExecResult, SandboxPool
from comlrl.tasks.sandbox.jobs import fault_metrics

SYNTAX_WEIGHT, TESTS_WEIGHT, OVERLAP_WEIGHT = 2.0, 4.0, 1.0
COMPLETION_RANGE = (-OVERLAP_WEIGHT, SYNTAX_WEIGHT + TESTS_WEIGHT)


@dataclass
class CompletionPrepared:
    """Static findings for one joint sample and its sandbox job."""

    out: dict
    job: ExecJob | None
    delivered: list[AgentMethods]
    missing: list[list[str]]
    foreign: list[list[str]]
    merge_error: str = ""


class CompletionScorer:
    """Scores per-agent method sets against a skeleton's unit tests."""

    def __init__(self, pool: SandboxPool):
        self.pool = pool

    def prepare(self, texts: list[str], item: dict) -> CompletionPrepared:
        """Parse each agent's methods, merge the owners' ones and build the test job."""
        assignment = item["assignment"]
        owner = {name: agent for agent, names in enumerate(assignment) for name in names}
        total = max(1, len(owner))
        delivered = [parse_agent_methods(t) for t in texts]
        valid, implementations, overlapping = 0, {}, set()
        missing = [[] for _ in texts]
        foreign = [[] for _ in texts]
        for agent, found in enumerate(delivered):
            for name in assignment[agent]:
                if name in found.methods:
                    valid += 1
                    implementations[name] = found.methods[name]
                else:
                    missing[agent].append(name)
            for name in list(found.methods) + list(found.broken):
                if name in owner and owner[name] != agent:
                    overlapping.add(name)
                    foreign[agent].append(name)
        out = {
            "methods_total": float(len(owner)),
            "methods_valid": float(valid),
            "overlapping": float(len(overlapping)),
            "tests_passed": 0.0,
            "tests_total": 0.0,
            "syntax_level": SYNTAX_WEIGHT * valid / total,
            "tests_level": 0.0,
            "overlap_level": -OVERLAP_WEIGHT * len(overlapping) / total,
            "timed_out": 0.0,
            **fault_metrics(None),
        }
        program = merge(item, implementations)
        error = syntax_error(program)
        job = None
        if error is None and implementations:
            job = ExecJob(setup=program, unittest_source=item["test"])
        prepared = CompletionPrepared(out, job, delivered, missing, foreign)
        if error is not None:
            prepared.merge_error = f"line {error.lineno}: {error.msg}"
        return prepared

    @staticmethod
    def finish(prepared: CompletionPrepared, result: ExecResult | None) -> dict:
        """Add the test level and the total."""
        out = prepared.out
        if result is not None:
            passed = result.passed if result.status == "ok" else 0
            out["tests_passed"], out["tests_total"] = float(passed), float(len(result.tests))
            out["timed_out"] = float(result.timed_out)
            out.update(fault_metrics(result))
            if result.tests:
                out["tests_level"] = TESTS_WEIGHT * passed / len(result.tests)
        out["total"] = out["syntax_level"] + out["tests_level"] + out["overlap_level"]
        return out

    def details(self, columns: list[list[str]], items: list[dict]):
        """Breakdowns plus prepared samples and sandbox results (feedback uses all three)."""
        prepared = [self.prepare([col[j] for col in columns], item) for j, item in enumerate(items)]
        results = self.pool.run_many([p.job for p in prepared])
        return [self.finish(p, r) for p, r in zip(prepared, results)], prepared, results

    def __call__(self, columns: list[list[str]], items: list[dict]) -> list[dict]:
        return self.details(columns, items)[0]
