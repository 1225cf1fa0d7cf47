"""Policy-only evaluation: one joint sample per eval item and turn, under a forked RNG.

:func:`evaluate_items` returns the metrics *and* the rollout trees, so a family that reports
more (the actor-critic ``metrics_callback``) works from the same trees instead of capturing
rollouts through flags.
"""

from __future__ import annotations

import random
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from comlrl.core.logging.completions import tree_rows
from comlrl.core.logging.console import print_completions_table
from comlrl.core.logging.reporting import open_run_log
from comlrl.core.rewards.reward_metrics import agent_reward_metrics
from comlrl.core.rollout import rollouts

if TYPE_CHECKING:
    from comlrl.core.trainer import TrainerBase


def evaluate(trainer: TrainerBase, num_eval_samples: int | None = None) -> dict[str, float]:
    """Evaluate on the first ``eval_num_samples`` eval items; log and return the metrics.

    Runs under a forked RNG, so evaluating never changes the training trajectory, and outside
    the training timings, which describe training work only.
    """
    with trainer.timing.excluded():
        if trainer.eval_dataset is None:
            return {}
        a = trainer.args
        limit = a.eval_num_samples if num_eval_samples is None else num_eval_samples
        if limit <= 0:
            return {}
        data = trainer.eval_dataset
        items = [data[i] for i in range(min(limit, len(data)))]
        with forked_rng(trainer):
            metrics = trainer.eval_metrics(items)
        # The eval record also carries the monitors' train/eval gap.
        gaps = trainer.monitors.after_eval(metrics)
        open_run_log(trainer)
        trainer.reporting.log_metrics({**metrics, **gaps}, reduce=False)
        step = trainer.run_state.environment_steps
        if getattr(a, "show_eval_sample", False):
            show_sample(getattr(trainer, "last_eval_sample", None), step)
        rows = getattr(trainer, "console_completions", 0)
        if rows > 0 and trainer.verbose and trainer.dist.is_main:
            episodes = getattr(trainer, "last_eval_episodes", None) or []
            print_completions_table(episodes[:rows], step)
        return metrics


@contextmanager
def forked_rng(trainer: TrainerBase):
    """No gradients, and every RNG (Python, NumPy, torch CPU and the agents' CUDA devices) as
    it was afterwards."""
    devices = [d for d in {str(d) for d in trainer.agent_devices} if d.startswith("cuda")]
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        state = random.getstate()
        np_state = np.random.get_state()
        try:
            yield
        finally:
            random.setstate(state)
            np.random.set_state(np_state)


def first_path(root: Any) -> list:
    """The nodes of ``root``'s first branch, turn by turn (the whole episode at K = 1)."""
    nodes, node = [], root
    while node is not None:
        nodes.append(node)
        node = node.children[0] if node.children else None
    return nodes


def show_sample(rows: list[dict] | None, step: int) -> None:
    """Print one eval episode's rows above the progress bar (``show_eval_sample``)."""
    if not rows:
        return
    from tqdm.auto import tqdm

    lines = [f"eval sample at env step {step}:"]
    for row in rows:
        lines.append(f"  turn {row['turn']}: reward {row['reward']}")
        for i, (prompt, text) in enumerate(zip(row["prompts"], row["completions"])):
            lines.append(f"    agent {i} prompt: {prompt!r}")
            lines.append(f"    agent {i} wrote:  {text!r}")
    tqdm.write("\n".join(lines), file=sys.stdout)


def evaluate_items(trainer: TrainerBase, items: list[dict]) -> tuple[dict[str, float], list]:
    """Per-turn ``eval/turn_t/reward_mean`` and ``expected_return`` (undiscounted) over
    ``items`` (with per-agent rewards: the agents' mean, plus each agent's
    ``eval/turn_t/agent_i_reward_mean``), plus the user's eval hooks; returns (metrics, rollout
    roots)."""
    params = rollouts.sampling_params(trainer, eval_mode=True)
    batch = max(1, trainer.args.eval_batch_size)
    turns = trainer.args.num_turns
    n_agents = trainer.num_agents
    rewards: list[list[float | None]] = [[None] * turns for _ in items]
    own_rewards: list[tuple[int, int, float]] = []  # (agent, turn, value) when per agent
    completions: list[list[list[str]]] = [[[] for _ in items] for _ in range(n_agents)]
    roots_all = []
    for start in range(0, len(items), batch):
        roots = rollouts.trees(trainer, items[start : start + batch], 1, params, first_step=0)
        roots_all.extend(roots)
        for j, root in enumerate(roots):
            for node in first_path(root):
                rewards[start + j][node.turn] = node.rewards[0]
                if node.per_agent:
                    own_rewards.extend(
                        (i, node.turn, node.agent_rewards[0][i]) for i in range(n_agents)
                    )
                for i in range(n_agents):
                    completions[i][start + j].append(node.samples[i].texts[0])
    if roots_all:
        trainer.last_eval_sample = tree_rows(first_path(roots_all[0]))
    # The first episodes, for the console table of comlrl train (a few rows at most).
    shown = max(1, getattr(trainer, "console_completions", 0))
    trainer.last_eval_episodes = [tree_rows(first_path(r)) for r in roots_all[:shown]]
    metrics: dict[str, float] = {}
    for t in range(turns):
        vals = [v for r in rewards if (v := r[t]) is not None]
        if not vals:
            continue
        metrics[f"eval/turn_{t + 1}/reward_mean"] = float(np.mean(vals))
        rets = [sum(x for x in r[t:] if x is not None) for r in rewards if r[t] is not None]
        metrics[f"eval/turn_{t + 1}/expected_return"] = float(np.mean(rets))
    metrics.update(agent_reward_metrics(own_rewards, prefix="eval/"))
    if trainer.eval_logger is not None and trainer.eval_aggregator is not None:
        detailed = trainer.eval_logger(
            agent_completions_turns=completions,
            batch_items=items,
            prompts=[it.get("prompt", "") for it in items],
        )
        agg = trainer.eval_aggregator(detailed, num_turns=turns) or {}
        extra = {f"eval/{k}": float(v) for k, v in agg.items()}
        extra.update(metrics)
        metrics = extra
    return metrics, roots_all


def _strip(metrics: dict[str, float]) -> dict[str, float]:
    return {k.removeprefix("eval/"): float(v) for k, v in metrics.items()}


def evaluate_policy(
    trainer: TrainerBase, items: list[dict], samples: int = 4, seed: int = 0
) -> dict[str, dict[str, float]]:
    """Greedy and sampled evaluation of the trainer's agents over ``items`` (``comlrl eval``).

    ``greedy``: one greedy episode per item. ``sampled``: ``samples`` episodes per item with
    the config's sampling settings (episode ``k`` seeded with ``seed + k``), every metric
    averaged over them, plus ``turn_t/best_of_k_reward``: the mean over items of the best
    reward of the k episodes at that turn. Keys are the training eval keys without ``eval/``
    (``turn_t/reward_mean``, ``turn_t/expected_return``, and the task's own, e.g. pass rates).
    Nothing is logged, and every RNG is as it was afterwards.
    """
    from comlrl.core.loop import seed_everything

    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}.")
    args = trainer.args
    greedy_before = args.eval_greedy
    out: dict[str, dict[str, float]] = {}
    with forked_rng(trainer):
        try:
            args.eval_greedy = True
            seed_everything(seed)
            out["greedy"] = _strip(evaluate_items(trainer, items)[0])
            args.eval_greedy = False
            runs: list[dict[str, Any]] = []
            best: dict[tuple[int, int], float] = {}  # (item, turn) -> best reward
            for k in range(samples):
                seed_everything(seed + k)
                metrics, roots = evaluate_items(trainer, items)
                runs.append(_strip(metrics))
                for j, root in enumerate(roots):
                    for node in first_path(root):
                        key = (j, node.turn)
                        best[key] = max(best.get(key, float("-inf")), float(node.rewards[0]))
        finally:
            args.eval_greedy = greedy_before
    keys = list(dict.fromkeys(k for run in runs for k in run))
    sampled = {k: float(np.mean([run[k] for run in runs if k in run])) for k in keys}
    for turn in sorted({t for _, t in best}):
        values = [v for (_, t), v in best.items() if t == turn]
        sampled[f"turn_{turn + 1}/best_of_{samples}_reward"] = float(np.mean(values))
    out["sampled"] = sampled
    return out
