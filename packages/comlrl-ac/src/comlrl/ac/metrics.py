"""What the actor-critic trainers report: training metrics per drained buffer, the user's
``metrics_callback``, and evaluation (the core's policy-only eval plus callback metrics)."""

from __future__ import annotations

import numpy as np

from comlrl.ac.samples import RolloutSample, sample_views
from comlrl.ac.targets import explained_variance, mean_std
from comlrl.core.loop import evaluation
from comlrl.core.rollout.record import ValueGroup
from comlrl.core.rollout.tree import TreeNode, compute_returns
from comlrl.core.trainer import TrainerBase

# What the actor-critic trainers add to the run description logged to W&B.
RUN_CONFIG_KEYS = TrainerBase.run_config_keys + (
    "critic_learning_rate",
    "rollout_buffer_size",
    "train_batch_size",
    "value_loss_coef",
    "value_clip_range",
    "critic_type",
    "discount",
    "use_separate_critic",
)


def episode_metrics(
    metrics_callback, nodes: list[TreeNode], per_agent: list[list[ValueGroup]]
) -> dict[str, float] | None:
    """``metrics_callback``'s metrics of one episode (logged when it enters the buffer):
    ``nodes`` are the item's tree nodes, ``per_agent[i][j]`` agent i's group at ``nodes[j]``."""
    if metrics_callback is None:
        return None
    return callback_metrics(metrics_callback, sample_views(nodes, per_agent)) or None


def callback_metrics(metrics_callback, samples: list[RolloutSample]) -> dict[str, float]:
    """What ``metrics_callback`` returns for ``samples``, checked to be a dict of numbers."""
    out = metrics_callback(samples)
    if out is None:
        return {}
    if not isinstance(out, dict):
        raise ValueError(
            f"metrics_callback must return a dict of numbers, got {type(out).__name__}."
        )
    metrics = {}
    for key, value in out.items():
        try:
            metrics[str(key)] = float(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"metrics_callback returned a non-numeric value for {key!r}: {value!r}."
            ) from exc
    return metrics


def actor_critic_stats(stats: dict[str, float], critic: bool = True) -> dict[str, float]:
    """One agent's means from core's update driver under this family's names: ``actor_loss``
    (the driver's ``loss``), ``critic_loss`` (NaN when every critic step was skipped; left out
    for actors whose critic updates apart, MAAC's), ``grad_norm``, then the rest."""
    named = {"actor_loss": stats["loss"]}
    if critic:
        named["critic_loss"] = stats.get("critic_loss", float("nan"))
    named["grad_norm"] = stats["grad_norm"]
    rest = {k: v for k, v in stats.items() if k not in ("loss", "critic_loss", "grad_norm")}
    return {**named, **rest}


def drain_metrics(
    args, buffers: list[list[ValueGroup]], stats: dict[str, float]
) -> dict[str, float]:
    """The training record of one drained buffer: per-agent values, advantages and explained
    variance, and the update's ``stats`` (core's reporting adds the per-turn rewards, returns
    and KL from the record)."""
    metrics: dict[str, float] = {}
    for i, groups in enumerate(buffers):
        values = [v for g in groups for v in g.values]
        adv_mean, adv_std = mean_std([x for g in groups for x in g.advantages])
        metrics[f"agent_{i}/value_mean"] = float(np.mean(values))
        metrics[f"agent_{i}/advantage_mean"] = adv_mean
        metrics[f"agent_{i}/advantage_std"] = adv_std
        metrics[f"agent_{i}/explained_variance"] = explained_variance(
            values, [t for g in groups for t in g.targets]
        )
    metrics.update(stats)
    return metrics


def evaluation_metrics(trainer, items: list[dict]) -> dict[str, float]:
    """The core's light eval (no critic, no KL), plus ``eval/{k}`` from ``metrics_callback``
    averaged over items."""
    metrics, roots = evaluation.evaluate_items(trainer, items)
    if trainer.metrics_callback is None or not roots:
        return metrics
    per_item: dict[str, list[float]] = {}
    for root in roots:
        # The callback's returns are the undiscounted reward-to-go, as in training.
        compute_returns(root, 1.0)
        views = sample_views(list(root.walk()))
        for key, value in callback_metrics(trainer.metrics_callback, views).items():
            per_item.setdefault(key, []).append(value)
    metrics.update({f"eval/{k}": float(np.mean(v)) for k, v in per_item.items()})
    return metrics
