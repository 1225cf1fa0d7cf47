"""Fitting MARLHF's joint reward model on preference pairs, with the held-out split.

A plain function of the MARLHF trainer: it reads the trainer's ``reward_model``,
``reward_tokenizer``, ``reward_optimizer``, ``rm_rng``, ``rm_check`` and ``args``, and sets
``reward_model_trained``, ``reward_model_per_agent`` and ``reward_model_metrics``.
"""

from __future__ import annotations

import time
from typing import Any

from comlrl.pbrl.reward_model import train_reward_model
from comlrl.pbrl.rm_checks import heldout_metrics, joint_texts, split_heldout


def fit_reward_model(trainer: Any, pairs) -> dict[str, float]:
    """Bradley-Terry training on ``pairs`` less the held-out items' pairs; metrics (with the
    held-out loss and accuracy) are logged every epoch. A new fit also restarts the on-policy
    check (and lifts an ``rl_stop_accuracy`` stop)."""
    t = trainer
    a = t.args
    seed = f"{a.seed}-{len(pairs)}-{pairs[0].prompts if pairs else ''}"
    # Pairs ranked by each agent's own reward teach the model every agent's reward.
    t.reward_model_per_agent = any(p.agent is not None for p in pairs)
    pairs, heldout = split_heldout(pairs, a.reward_heldout_fraction, seed)
    winners, losers = joint_texts(pairs)
    held_texts = joint_texts(heldout)
    clock = [time.perf_counter()]
    t.rm_check.reset()
    t.rm_check.stopped = False

    def log(epoch_metrics: dict[str, float]) -> None:
        epoch_metrics.update(
            heldout_metrics(t.reward_model, t.reward_tokenizer, *held_texts, a.reward_max_length)
        )
        # each epoch's record carries the reward model's training time as timing/update
        now = time.perf_counter()
        t.timing.add("update", now - clock[0])
        clock[0] = now
        t.reporting.log_record(epoch_metrics)

    metrics = train_reward_model(
        trainer=t,
        model=t.reward_model,
        tokenizer=t.reward_tokenizer,
        optimizer=t.reward_optimizer,
        winners=winners,
        losers=losers,
        epochs=a.reward_num_train_epochs,
        batch_size=a.reward_train_batch_size,
        max_length=a.reward_max_length,
        rng=t.rm_rng,
        log=log,
    )
    t.timing.add("update", time.perf_counter() - clock[0])
    t.reward_model_trained = True
    t.reward_model_metrics = metrics
    return metrics
