"""TLDR: one agent writes a concise summary of a post, the other a detailed one."""

from __future__ import annotations

from comlrl.tasks.common.base import BaseTask
from comlrl.tasks.writing.prompts import tldr_concise, tldr_detailed
from comlrl.tasks.writing.reward import TLDR_LEVELS, WRITING_MAX, pair_scorer, writing_notes


class TLDRTask(BaseTask):
    """Concise and detailed summaries of Reddit-style posts (hub: ``trl-lib/tldr``)."""

    name = "writing_tldr"
    description = "Two agents summarize a post: one concise, one detailed (leveled style reward)."
    num_agents = 2
    agent_counts = (2,)
    sample_package = "comlrl.tasks.writing"
    sample_file = "tldr_sample.jsonl"
    hub_id = "trl-lib/tldr"
    reward_bounds = (0.0, WRITING_MAX)

    def normalize(self, row: dict) -> dict:
        """Rows need the post text in ``prompt`` (``post`` or ``content`` are accepted too)."""
        if not isinstance(row, dict):
            raise ValueError(f"writing_tldr rows must be mappings, got {type(row).__name__}.")
        text = next(
            (row[k] for k in ("prompt", "post", "content") if isinstance(row.get(k), str)), None
        )
        if text is None or not text.strip():
            raise ValueError(
                "writing_tldr dataset row needs a non-empty 'prompt' (the post text); "
                f"got keys {sorted(row)}."
            )
        return {**row, "prompt": text}

    def renders(self, num_agents, options):
        """Agent 0 writes the concise summary, agent 1 the detailed one."""
        return [tldr_concise, tldr_detailed]

    def scorer(self, num_agents, options):
        """The leveled TLDR reward (length window, length ratio, unique words, style)."""
        return pair_scorer(TLDR_LEVELS)

    def critique_notes(self, reward, options):
        """Notes derived from the first failed TLDR level."""
        return writing_notes(
            TLDR_LEVELS,
            (
                "keep yours short so the other is 1.6-3.2x longer",
                "make yours 1.6-3.2x as long as the short one",
            ),
        )


TASK = TLDRTask()
