"""Per-level evaluation metrics, built on a reward's ``breakdown``."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from comlrl.tasks.common.lookup import ItemIndex


def make_eval_hooks(reward: Callable, index: ItemIndex, num_agents: int):
    """``(eval_logger, eval_aggregator)`` that report every reward level per turn.

    ``eval_logger(*, agent_completions_turns, batch_items=None, prompts=None, test_cases=None,
    entry_points=None)`` takes ``agent_completions_turns[agent][sample] = [turn-1 text, ...]``
    and returns one dict per sample with keys ``turn_<t>/<level>``. Rows come from
    ``batch_items`` when given, else they are looked up by ``prompts``; ``test_cases`` and
    ``entry_points`` are accepted for compatibility and not needed.
    ``eval_aggregator(detailed_metrics, num_turns=None)`` averages every key over the samples.
    """

    def eval_logger(
        *,
        agent_completions_turns: Sequence[Sequence[Sequence[str]]],
        batch_items: Sequence[dict] | None = None,
        prompts: Sequence[str] | None = None,
        test_cases: Sequence | None = None,
        entry_points: Sequence | None = None,
    ) -> list[dict[str, float]]:
        if len(agent_completions_turns) != num_agents:
            raise ValueError(
                f"agent_completions_turns must hold {num_agents} agents, got "
                f"{len(agent_completions_turns)}."
            )
        samples = len(agent_completions_turns[0])
        items = index.resolve(batch_items, prompts, samples, "eval_logger")
        turns = max(
            (len(agent_completions_turns[a][s]) for a in range(num_agents) for s in range(samples)),
            default=0,
        )
        metrics: list[dict[str, float]] = [{} for _ in range(samples)]
        for turn in range(turns):
            picked = [
                s
                for s in range(samples)
                if all(len(agent_completions_turns[a][s]) > turn for a in range(num_agents))
            ]
            if not picked:
                continue
            columns = [
                [agent_completions_turns[a][s][turn] for s in picked] for a in range(num_agents)
            ]
            rows = reward.breakdown(columns, batch_items=[items[s] for s in picked])
            for sample, row in zip(picked, rows):
                for key, value in row.items():
                    metrics[sample][f"turn_{turn + 1}/{key}"] = float(value)
        return metrics

    def eval_aggregator(
        detailed_metrics: Sequence[dict[str, float]], num_turns: int | None = None
    ) -> dict[str, float]:
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for row in detailed_metrics:
            for key, value in row.items():
                if isinstance(value, (int, float)) and math.isfinite(value):
                    sums[key] = sums.get(key, 0.0) + float(value)
                    counts[key] = counts.get(key, 0) + 1
        return {key: sums[key] / counts[key] for key in sorted(sums)}

    return eval_logger, eval_aggregator
