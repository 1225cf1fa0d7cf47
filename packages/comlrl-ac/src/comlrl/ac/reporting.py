"""What the actor-critic trainers report: training metrics per drained buffer, the user's
``metrics_callback``, and evaluation (the core's policy-only eval plus callback metrics)."""

from __future__ import annotations

import numpy as np

from comlrl.ac.samples import Episode, RolloutSample
from comlrl.ac.targets import explained_variance, mean_std
from comlrl.core import evaluation
from comlrl.core.rewards.report import agent_reward_metrics
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


def episode_metrics(metrics_callback, episode: Episode) -> dict[str, float] | None:
    """``metrics_callback``'s metrics of one episode (logged when it enters the buffer)."""
    if metrics_callback is None:
        return None
    flat = [s for per_agent in episode.samples for s in per_agent]
    return callback_metrics(metrics_callback, flat) or None


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


def drain_metrics(
    args, buffers: list[list[RolloutSample]], stats: dict[str, float]
) -> dict[str, float]:
    """The training record of one drained buffer: per-turn rewards, returns and KL, per-agent
    values, advantages and explained variance, per-agent rewards, and the update's ``stats``."""
    a = args
    everything = [s for b in buffers for s in b]
    metrics: dict[str, float] = {}
    for turn in sorted({s.turn_idx for s in everything}):
        group = [s for s in everything if s.turn_idx == turn]
        first = [s for s in buffers[0] if s.turn_idx == turn]
        t = turn + 1
        metrics[f"turn_{t}/reward_mean"] = float(
            np.mean([s.metadata.get("joint_reward", s.reward) for s in first])
        )
        metrics[f"turn_{t}/expected_return"] = float(np.mean([s.returns for s in group]))
        if a.reference_kl_enabled:
            kls = [s.reference_kl for s in group if s.reference_kl is not None]
            if kls:
                metrics[f"turn_{t}/reference_kl_mean"] = float(np.mean(kls))
                metrics[f"turn_{t}/reference_kl_penalty_mean"] = a.reference_kl_coef * float(
                    np.mean(kls)
                )
    for i, samples in enumerate(buffers):
        advs = [float(s.advantage) for s in samples]
        adv_mean, adv_std = mean_std(advs)
        metrics[f"agent_{i}/value_mean"] = float(np.mean([s.old_value for s in samples]))
        metrics[f"agent_{i}/advantage_mean"] = adv_mean
        metrics[f"agent_{i}/advantage_std"] = adv_std
        metrics[f"agent_{i}/explained_variance"] = explained_variance(
            [s.old_value for s in samples], [s.value_target for s in samples]
        )
    metrics.update(
        agent_reward_metrics(
            (s.agent_idx, s.turn_idx, s.reward if "joint_reward" in s.metadata else None)
            for s in everything
        )
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
        nodes = list(root.walk())
        samples = trainer._tree_samples(nodes, with_kl=False)
        flat = [s for per_agent in samples for per_node in per_agent for s in per_node]
        for key, value in callback_metrics(trainer.metrics_callback, flat).items():
            per_item.setdefault(key, []).append(value)
    metrics.update({f"eval/{k}": float(np.mean(v)) for k, v in per_item.items()})
    return metrics
