"""How far MARLHF can trust its reward model: held-out pairs, an on-policy check, and a stop.

A reward model fitted on a few pairs from the initial policy can rank its own training pairs
almost perfectly and still be wrong about anything else; the RL phase then raises the model's
score while the task reward stays flat (reward-model over-optimization). Two measurements say
when that happens:

* **held-out accuracy**: the pairs of a share of the items (``reward_heldout_fraction``) are kept
  out of training and ranked by the reward model after every epoch. Items, not pairs, are held
  out, since pairs of one item share their candidates.
* **on-policy accuracy** (``reward_model_onpolicy_check``): the RL phase's own samples are also
  scored with the task reward, and every two samples of one item with different task rewards
  count as a pair the reward model should order the same way. It costs one task-reward call per
  RL batch and measures the reward model where the policy is now, not where it started.

``rl_stop_accuracy`` stops the RL phase after an epoch whose on-policy accuracy falls below it.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from typing import Any

import torch.nn.functional as F

from comlrl.pbrl.reward_model import format_joint_text, score_texts, train_reward_model
from comlrl.pbrl.rl_phase import mean_joint_scores


def split_heldout(pairs: Sequence, fraction: float, seed: str) -> tuple[list, list]:
    """``(train, heldout)`` pairs: the pairs of ``round(fraction * items)`` items (at least one,
    and never every item) are held out. Items are told apart by their prompts; ``seed`` fixes
    which are drawn, so a resumed run draws the same ones."""
    if fraction <= 0:
        return list(pairs), []
    keys = list(dict.fromkeys(tuple(p.prompts) for p in pairs))
    if len(keys) < 2:
        return list(pairs), []
    count = min(len(keys) - 1, max(1, round(fraction * len(keys))))
    random.Random(seed).shuffle(keys)
    held = set(keys[:count])
    train = [p for p in pairs if tuple(p.prompts) not in held]
    return train, [p for p in pairs if tuple(p.prompts) in held]


def heldout_metrics(model, tokenizer, winners, losers, max_length) -> dict[str, float]:
    """Bradley-Terry loss and accuracy of ``model`` on held-out winner/loser texts."""
    if not winners:
        return {}
    import torch

    w = torch.tensor(score_texts(model, tokenizer, winners, max_length))
    lo = torch.tensor(score_texts(model, tokenizer, losers, max_length))
    margins = w - lo
    return {
        "reward_model/heldout_loss": float(-F.logsigmoid(margins).mean()),
        "reward_model/heldout_accuracy": float((margins > 0).float().mean()),
        "reward_model/heldout_pairs": float(len(winners)),
    }


def ranking_agreement(groups: Sequence[Sequence[int]], model_scores, task_scores) -> tuple:
    """``(agreeing, counted)`` over every two members of a group whose task scores differ:
    agreeing when the model orders them the same way (a model tie counts as wrong)."""
    agree = total = 0
    for members in groups:
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                a, b = members[x], members[y]
                gap = task_scores[a] - task_scores[b]
                if gap == 0:
                    continue
                total += 1
                agree += int((model_scores[a] - model_scores[b]) * gap > 0)
    return agree, total


class OnPolicyCheck:
    """Accumulates the on-policy accuracy and task reward of one RL epoch."""

    def __init__(self):
        self.reset()
        self.stopped = False

    def reset(self) -> None:
        """Start a new epoch's counts."""
        self.agree = self.pairs = 0
        self.task_sum = 0.0
        self.samples = 0

    def observe(self, trainer, agent_completions, prompts, batch_items, model_scores) -> None:
        """Score an RL batch with the task reward and count the reward model's agreement."""
        task = trainer.rollouts.score(
            list(agent_completions), prompts=prompts, batch_items=batch_items
        )
        groups: dict[str, list[int]] = {}
        for j, prompt in enumerate(prompts):
            groups.setdefault(prompt, []).append(j)
        agree, total = ranking_agreement(list(groups.values()), model_scores, task)
        self.agree += agree
        self.pairs += total
        self.task_sum += float(sum(task))
        self.samples += len(task)

    def end_epoch(self, stop_below: float | None) -> dict[str, float]:
        """The epoch's metrics; sets ``stopped`` when the accuracy is below ``stop_below``."""
        accuracy = self.agree / self.pairs if self.pairs else math.nan
        metrics = {
            "reward_model/onpolicy_accuracy": accuracy,
            "reward_model/onpolicy_pairs": float(self.pairs),
            "reward_model/onpolicy_task_reward": self.task_sum / self.samples
            if self.samples
            else math.nan,
        }
        if stop_below is not None and self.pairs and accuracy < stop_below:
            self.stopped = True
        metrics["rl/stopped"] = float(self.stopped)
        self.reset()
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """Counts and the stop flag (checkpoints)."""
        return {
            "agree": self.agree,
            "pairs": self.pairs,
            "task_sum": self.task_sum,
            "samples": self.samples,
            "stopped": self.stopped,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        self.agree, self.pairs = int(state["agree"]), int(state["pairs"])
        self.task_sum, self.samples = float(state["task_sum"]), int(state["samples"])
        self.stopped = bool(state["stopped"])


def joint_texts(pairs) -> tuple[list[str], list[str]]:
    """Joint winner and loser texts of ``pairs`` (the reward model's inputs)."""
    winners = [format_joint_text(p.prompts, p.winner_completions, p.agent) for p in pairs]
    losers = [format_joint_text(p.prompts, p.loser_completions, p.agent) for p in pairs]
    return winners, losers


class RewardModelTraining:
    """Reward-model fitting (with the held-out split) and scoring, part of MARLHF's
    :class:`~comlrl.pbrl.marlhf.RLHFMixin`; reads the trainer's ``reward_model``,
    ``reward_tokenizer``, ``reward_optimizer``, ``rm_rng``, ``rm_check`` and ``args``."""

    def pair_texts(self, pairs) -> tuple[list[str], list[str]]:
        """Joint winner and loser texts of ``pairs`` (the reward model's inputs)."""
        return joint_texts(pairs)

    def fit_reward_model(self, pairs) -> dict[str, float]:
        """Bradley-Terry training on ``pairs`` less the held-out items' pairs; metrics (with
        the held-out loss and accuracy) are logged every epoch. A new fit also restarts the
        on-policy check (and lifts an ``rl_stop_accuracy`` stop)."""
        a = self.args
        seed = f"{a.seed}-{len(pairs)}-{pairs[0].prompts if pairs else ''}"
        # Pairs ranked by each agent's own reward teach the model every agent's reward.
        self.reward_model_per_agent = any(p.agent is not None for p in pairs)
        pairs, heldout = split_heldout(pairs, a.reward_heldout_fraction, seed)
        winners, losers = self.pair_texts(pairs)
        held_texts = self.pair_texts(heldout)
        clock = [time.perf_counter()]
        self.rm_check.reset()
        self.rm_check.stopped = False

        def log(epoch_metrics: dict[str, float]) -> None:
            epoch_metrics.update(
                heldout_metrics(
                    self.reward_model, self.reward_tokenizer, *held_texts, a.reward_max_length
                )
            )
            # each epoch's record carries the reward model's training time as timing/update
            now = time.perf_counter()
            self.add_timing("update", now - clock[0])
            clock[0] = now
            self.reporting.log_record(epoch_metrics)

        metrics = train_reward_model(
            trainer=self,
            model=self.reward_model,
            tokenizer=self.reward_tokenizer,
            optimizer=self.reward_optimizer,
            winners=winners,
            losers=losers,
            epochs=a.reward_num_train_epochs,
            batch_size=a.reward_train_batch_size,
            max_length=a.reward_max_length,
            rng=self.rm_rng,
            log=log,
        )
        self.add_timing("update", time.perf_counter() - clock[0])
        self.reward_model_trained = True
        self.reward_model_metrics = metrics
        return metrics

    def reward_model_scores(self, prompts_per_actor, completions_per_actor) -> list[float]:
        """Scores of joint responses: ``prompts_per_actor[i][j]``, ``completions_per_actor[i][j]``
        (a reward model of per-agent rewards: the mean of the agents' scores)."""
        return mean_joint_scores(self, prompts_per_actor, completions_per_actor)
