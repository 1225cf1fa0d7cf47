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
from collections.abc import Sequence
from typing import Any

import torch.nn.functional as F

from comlrl.core.rollout import rollouts
from comlrl.pbrl.reward_model import format_joint_text, score_texts


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
        task = rollouts.score(
            trainer, list(agent_completions), prompts=prompts, batch_items=batch_items
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
