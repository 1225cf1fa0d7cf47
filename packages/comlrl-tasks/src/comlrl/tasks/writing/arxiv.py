"""arXiv: two agents expand an abstract into the two halves of an introduction."""

from __future__ import annotations

from comlrl.tasks.common.base import BaseTask
from comlrl.tasks.writing.prompts import arxiv_background, arxiv_method
from comlrl.tasks.writing.reward import ARXIV_LEVELS, WRITING_MAX, pair_scorer, writing_notes


class ArxivTask(BaseTask):
    """Introduction writing from abstracts (hub: ``LovelyBuggies/arXiv_abstract``)."""

    name = "writing_arxiv"
    description = "Two agents expand an abstract: background/motivation vs. method/implications."
    num_agents = 2
    agent_counts = (2,)
    sample_package = "comlrl.tasks.writing"
    sample_file = "arxiv_sample.jsonl"
    hub_id = "LovelyBuggies/arXiv_abstract"
    default_eval_split = "val"
    reward_bounds = (0.0, WRITING_MAX)

    def normalize(self, row: dict) -> dict:
        """Rows need the abstract in ``abstract_text`` (or ``abstract`` / ``prompt``)."""
        if not isinstance(row, dict):
            raise ValueError(f"writing_arxiv rows must be mappings, got {type(row).__name__}.")
        keys = ("abstract_text", "abstract", "prompt")
        text = next((row[k] for k in keys if isinstance(row.get(k), str)), None)
        if text is None or not text.strip():
            raise ValueError(
                "writing_arxiv dataset row needs a non-empty 'abstract_text'; "
                f"got keys {sorted(row)}."
            )
        return {**row, "prompt": text}

    def renders(self, num_agents, options):
        """Agent 0 writes background and motivation, agent 1 method and implications."""
        return [arxiv_background, arxiv_method]

    def scorer(self, num_agents, options):
        """The leveled arXiv reward (length window, balance, unique words, style)."""
        return pair_scorer(ARXIV_LEVELS)

    def critique_notes(self, reward, options):
        """Notes derived from the first failed arXiv level."""
        return writing_notes(
            ARXIV_LEVELS,
            (
                "keep both halves about equally long",
                "make yours 1.0-1.3x as long as the background",
            ),
        )


TASK = ArxivTask()
