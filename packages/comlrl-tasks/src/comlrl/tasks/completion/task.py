"""The code-completion task: agents fill in their share of a class skeleton's methods."""

from __future__ import annotations

from comlrl.core.config.validation import check_bool, check_int, normalize_choice
from comlrl.tasks.common.base import BaseTask
from comlrl.tasks.common.transitions import make_critique_transition
from comlrl.tasks.completion.feedback import make_completion_transition
from comlrl.tasks.completion.prompts import method_instruction
from comlrl.tasks.completion.reward import COMPLETION_RANGE, CompletionScorer
from comlrl.tasks.completion.skeleton import (
    ASSIGNMENT_MODES,
    assign_methods,
    parse_skeleton,
    skeleton_methods,
)
from comlrl.tasks.sandbox import SandboxLimits, SandboxPool


class CodeCompletionTask(BaseTask):
    """ClassEval-style skeletons (hub: ``FudanSELab/ClassEval``, split ``test`` only).

    Rows need ``skeleton`` (the class with method stubs and docstrings), ``test`` (unittest
    source) and ``class_name``; ``import_statement`` (a list of import lines) is optional.
    """

    name = "code_completion"
    description = (
        "Agents implement disjoint methods of a class skeleton; unit tests score the merge."
    )
    num_agents = 2
    agent_counts = None
    sample_package = "comlrl.tasks.completion"
    sample_file = "classeval_sample.jsonl"
    default_train_split = "train"
    default_eval_split = "test"
    reward_bounds = COMPLETION_RANGE
    transition_modes = ("level_feedback", "plain", "critique")
    option_defaults = {
        "sandbox": None,
        "sandbox_workers": None,
        "assignment": "arity",
        "original_prompt": True,
        "previous_response": True,
        "hub_config": None,
    }
    # (agent count, assignment mode) of the build in progress; normalize() splits methods by it.
    _assign = (2, "arity")

    def options(self, raw):
        """Validate sandbox limits, the method assignment mode and feedback flags."""
        merged = super().options(raw)
        merged["sandbox"] = SandboxLimits.from_options(merged["sandbox"])
        if merged["sandbox_workers"] is not None:
            check_int("task.options.sandbox_workers", merged["sandbox_workers"], 1)
        merged["assignment"] = normalize_choice(
            "task.options.assignment", merged["assignment"], ASSIGNMENT_MODES
        )
        check_bool("task.options.original_prompt", merged["original_prompt"])
        check_bool("task.options.previous_response", merged["previous_response"])
        return merged

    def build(self, spec):
        """As the base flow, but rows get their per-agent method assignment first."""
        self._assign = (spec.num_agents, self.options(spec.options)["assignment"])
        return super().build(spec)

    def normalize(self, row):
        """Validate the ClassEval fields and attach ``assignment`` (method names per agent)."""
        if not isinstance(row, dict):
            raise ValueError(f"code_completion rows must be mappings, got {type(row).__name__}.")
        for key in ("skeleton", "test"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise ValueError(
                    f"code_completion dataset row is missing the text field {key!r}; "
                    f"got keys {sorted(row)}."
                )
        class_name = row.get("class_name") or parse_skeleton(row["skeleton"], None)[1].name
        methods = skeleton_methods(row["skeleton"], class_name)
        if not methods:
            raise ValueError(
                f"code_completion row {row.get('task_id')!r}: the skeleton has no "
                "methods to implement."
            )
        num_agents, mode = self._assign
        imports = row.get("import_statement") or []
        if isinstance(imports, str):
            imports = [imports]
        return {
            **row,
            "class_name": class_name,
            "import_statement": list(imports),
            "prompt": row["skeleton"],
            "assignment": assign_methods(methods, num_agents, mode),
        }

    def renders(self, num_agents, options):
        """Agent i sees the skeleton and the list of its own methods."""
        return [method_instruction(a) for a in range(num_agents)]

    def scorer(self, num_agents, options):
        """Syntax, merged unit tests and overlap, on a fresh sandbox pool."""
        return CompletionScorer(SandboxPool(options["sandbox"], options["sandbox_workers"]))

    def transition(self, mode, *, renders, index, reward, scorer, options, num_agents):
        """``level_feedback`` and ``plain`` use the method checks; ``critique`` is generic."""
        if mode == "critique":
            return make_critique_transition(renders, index=index, name="code_completion_critique")
        return make_completion_transition(mode, scorer, index, num_agents, options)


TASK = CodeCompletionTask()
