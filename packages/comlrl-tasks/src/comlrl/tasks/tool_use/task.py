"""The tool-use task: agents split the function calls that answer a request."""

from __future__ import annotations

from comlrl.core.config.validation import normalize_choice
from comlrl.tasks.common.base import BaseTask
from comlrl.tasks.tool_use.calls import parse_calls
from comlrl.tasks.tool_use.data import normalize_tool_row
from comlrl.tasks.tool_use.prompts import ROLE_MODES, call_instruction
from comlrl.tasks.tool_use.reward import TOOL_RANGE, score_sample, tool_scorer


class ToolUseTask(BaseTask):
    """BFCL-style parallel calls (hub: ``OpenMLRL/BFCL-V4-Parallel-Native``)."""

    name = "tool_use"
    description = "Agents split the function calls a request needs; scored against gold calls."
    num_agents = 2
    agent_counts = None
    sample_package = "comlrl.tasks.tool_use"
    sample_file = "tool_use_sample.jsonl"
    reward_bounds = TOOL_RANGE
    option_defaults = {"role_mode": "self_select", "hub_config": None}

    def options(self, raw):
        """Validate ``role_mode`` (self_select or split_by_order)."""
        merged = super().options(raw)
        merged["role_mode"] = normalize_choice(
            "task.options.role_mode", merged["role_mode"], ROLE_MODES
        )
        return merged

    def normalize(self, row):
        """Request text, function schemas and gold calls (BFCL forms accepted)."""
        return normalize_tool_row(row)

    def renders(self, num_agents, options):
        """Agent i gets the request, the schemas and its share rule."""
        return [call_instruction(a, num_agents, options["role_mode"]) for a in range(num_agents)]

    def scorer(self, num_agents, options):
        """The flat tool-use reward."""
        return tool_scorer

    def critique_notes(self, reward, options):
        """Tell each agent whether its answer parsed and which calls it duplicated."""

        def notes(item, completions):
            row = score_sample(completions, item)
            out = []
            for text in completions:
                lines = []
                if parse_calls(text) is None:
                    lines.append("Your answer was not a JSON list of calls.")
                if row["overlap"] > 0:
                    lines.append("Some calls were made by more than one agent.")
                if row["calls_predicted"] != row["calls_gold"]:
                    lines.append(
                        f"The team made {int(row['calls_predicted'])} distinct calls; "
                        "check how many the request needs."
                    )
                out.append(lines)
            return out

        return notes


TASK = ToolUseTask()
