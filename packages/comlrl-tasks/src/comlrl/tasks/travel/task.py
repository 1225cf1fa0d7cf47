"""The travel-planning task: two agents fill disjoint slots of a day-by-day plan."""

from __future__ import annotations

from comlrl.tasks.common.base import BaseTask
from comlrl.tasks.travel.data import normalize_travel_row
from comlrl.tasks.travel.prompts import plan_instruction
from comlrl.tasks.travel.reward import TRAVEL_RANGE, score_plan, travel_scorer


class TravelTask(BaseTask):
    """TravelPlanner-style plans (hub: ``osunlp/TravelPlanner``, config ``train``)."""

    name = "travel"
    description = "Two agents fill disjoint daily plan slots as JSON; merged and scored densely."
    num_agents = 2
    agent_counts = (2,)
    sample_package = "comlrl.tasks.travel"
    sample_file = "travel_sample.jsonl"
    reward_bounds = TRAVEL_RANGE
    option_defaults = {"hub_config": None}

    def normalize(self, row):
        """Request, day count, reference plan and optional reference information."""
        return normalize_travel_row(row)

    def renders(self, num_agents, options):
        """Agent 0: city, transport, lodging, even-day dinners; agent 1: the other meals and sights."""
        return [plan_instruction(0), plan_instruction(1)]

    def scorer(self, num_agents, options):
        """The dense joint plan reward."""
        return travel_scorer

    def critique_notes(self, reward, options):
        """Coverage, conflicts and JSON problems, per agent."""

        def notes(item, completions):
            row = score_plan(completions, item)
            shared = []
            if row["coverage"] < 1.0:
                shared.append(f"Only {row['coverage']:.0%} of the plan's slots were filled.")
            if row["conflict"] > 0 or row["overlap"] > 0:
                shared.append("Some slots were filled by both planners; fill only your own.")
            out = []
            for text in completions:
                lines = list(shared)
                if '"assignments"' not in text:
                    lines.insert(0, 'Your answer must be JSON with an "assignments" list.')
                out.append(lines)
            return out

        return notes


TASK = TravelTask()
