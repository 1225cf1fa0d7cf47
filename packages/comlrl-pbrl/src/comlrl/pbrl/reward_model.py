"""The joint reward model of MARLHF: a transformer backbone with a scalar head, trained on
preference pairs with a Bradley-Terry loss.

The backbone is the base transformer without its LM head, so no vocabulary logits are computed;
the score is read from the last-layer hidden state of the last real token (``pooling="last"``,
as in CoMLRL) or from the mean of the real tokens' hidden states (``pooling="mean"``). Winner and
loser texts of a batch go through one padded forward.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from comlrl.core.distributed import all_reduce_sum
from comlrl.core.models import model_load_kwargs, unresolved_model
from comlrl.core.models.backbone import backbone_of, hidden_size_of
from comlrl.core.quiet import quiet_hub_progress
from comlrl.core.training.dropout import dropout_off
from comlrl.core.training.train_step import Target, train_step
from comlrl.pbrl.candidates import rank_share

JOINT_HEADER = "Joint multi-agent response"
# How a row's hidden states become the one vector the head scores.
POOLINGS = ("last", "mean")


def format_joint_text(
    prompts: Sequence[str], completions: Sequence[str], agent: int | None = None
) -> str:
    """The reward model's input: a header, then every agent's prompt and response.

    Agents are numbered from 1 in this text (the CoMLRL layout, kept so reward models trained
    with it score the same input). With per-agent rewards the model scores each agent's own
    reward: ``agent`` (0-based) appends a block naming whose reward is asked for.
    """
    blocks = [JOINT_HEADER]
    for i, (prompt, completion) in enumerate(zip(prompts, completions), start=1):
        blocks.append(f"Agent {i} prompt:\n{prompt}")
        blocks.append(f"Agent {i} response:\n{completion}")
    if agent is not None:
        blocks.append(f"Reward of agent {agent + 1}")
    return "\n\n".join(blocks)


class JointRewardModel(torch.nn.Module):
    """A scalar score for a joint multi-agent response.

    Args:
        backbone: a transformer returning ``last_hidden_state``, or a causal LM (such as a GPT-2
            LM-head model, as CoMLRL 1.4.3 took): its base transformer then scores, so the
            hidden states are read without computing vocabulary logits.
        freeze_backbone: train the head only.
        seed: seed of the head's initialization (None: the global random stream).
        pooling: ``"last"`` scores the last real token's hidden state; ``"mean"`` the mean over
            the real tokens. A mean keeps how many tokens of each kind a text has (how long each
            agent's response is relative to the rest), which one token's state may not.
    """

    def __init__(
        self,
        backbone: torch.nn.Module,
        freeze_backbone: bool = False,
        seed: int | None = None,
        pooling: str = "last",
    ):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {list(POOLINGS)}, got {pooling!r}.")
        self.pooling = pooling
        self.backbone = backbone
        self.config = backbone.config
        # A seeded head makes the initial reward model a function of the config alone (resumed
        # runs re-create the same one) and leaves the global random stream untouched.
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(seed)
            self.score_head = torch.nn.Linear(hidden_size_of(backbone, "reward model backbone"), 1)
        param = next(backbone.parameters())
        self.score_head.to(device=param.device, dtype=param.dtype)
        self.freeze_backbone = freeze_backbone
        if freeze_backbone:
            for p in self.backbone.parameters():
                p.requires_grad_(False)

    @classmethod
    def from_source(
        cls,
        source: Any,
        model_config: dict | None = None,
        freeze_backbone: bool = False,
        seed: int | None = None,
        pooling: str = "last",
    ) -> JointRewardModel:
        """Build from a hub id / local dir (loaded without its LM head) or a causal-LM object
        (its base transformer is deep-copied, so the agent is not touched)."""
        if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
            from transformers import AutoModel

            with quiet_hub_progress(), unresolved_model(source, "reward_model"):
                backbone = AutoModel.from_pretrained(str(source), **model_load_kwargs(model_config))
        else:
            backbone = copy.deepcopy(backbone_of(source))
        return cls(backbone, freeze_backbone=freeze_backbone, seed=seed, pooling=pooling)

    @property
    def device(self) -> torch.device:
        """Where the head lives."""
        return self.score_head.weight.device

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """One score per row: read at the last position whose attention mask is 1, or (mean
        pooling) averaged over the positions whose mask is 1."""
        positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        hidden = backbone_of(self.backbone)(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=positions,
            use_cache=False,
        ).last_hidden_state
        if self.pooling == "mean":
            weights = attention_mask.to(hidden.dtype).unsqueeze(-1)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
            return self.score_head(pooled).squeeze(-1).float()
        width = attention_mask.shape[1]
        idx = torch.arange(width, device=attention_mask.device)
        last = (attention_mask * idx).argmax(-1)
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        return self.score_head(pooled).squeeze(-1).float()


def encode_texts(tokenizer, texts: Sequence[str], max_length: int | None, device) -> tuple:
    """Right-padded ids and mask. Over-long texts keep their *end* (left truncation), so the last
    agent's response is never cut off."""
    rows = tokenizer(list(texts), add_special_tokens=True)["input_ids"]
    if max_length is not None:
        rows = [r[-max_length:] for r in rows]
    width = max(1, max(len(r) for r in rows))
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids.to(device), mask.to(device)


def score_texts(
    model: JointRewardModel,
    tokenizer,
    texts: Sequence[str],
    max_length: int | None,
    batch: int = 16,
) -> list[float]:
    """Scores under ``no_grad`` in eval mode (the previous mode is restored)."""
    was_training = model.training
    model.eval()
    out: list[float] = []
    try:
        with torch.no_grad():
            for s in range(0, len(texts), batch):
                ids, mask = encode_texts(tokenizer, texts[s : s + batch], max_length, model.device)
                out.extend(model(ids, mask).tolist())
    finally:
        model.train(was_training)
    return out


def bradley_terry_step(
    model: JointRewardModel,
    tokenizer,
    winners: Sequence[str],
    losers: Sequence[str],
    max_length: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Loss ``-mean log sigmoid(s_w - s_l)`` and the per-pair margins, winners and losers in one
    padded forward."""
    ids, mask = encode_texts(tokenizer, list(winners) + list(losers), max_length, model.device)
    scores = model(ids, mask)
    n = len(winners)
    margins = scores[:n] - scores[n:]
    return -F.logsigmoid(margins).mean(), margins.detach()


def train_reward_model(
    model: JointRewardModel,
    tokenizer,
    optimizer: torch.optim.Optimizer,
    winners: Sequence[str],
    losers: Sequence[str],
    *,
    trainer: Any,
    epochs: int,
    batch_size: int,
    max_length: int | None,
    rng: random.Random,
    log=None,
) -> dict[str, float]:
    """Bradley-Terry training; ``log(metrics)`` is called after every epoch with the epoch's mean
    ``reward_model/loss`` and ``reward_model/accuracy``. Returns the last epoch's metrics.

    Every step goes through the trainer's step driver (:func:`comlrl.core.training.train_step.train_step`),
    so ``max_grad_norm`` clips it and ``nonfinite_loss`` decides what a non-finite loss does (a
    skipped batch is counted as the policies' are); the learning rate stays constant (no
    ``lr_scheduler_type``: the schedule counts agent steps). In a multi-process run every rank
    shuffles the same order, scores its share of each batch and averages gradients with the
    others, so all ranks keep one model. The model trains without dropout, as it scores (TRL's
    reward training ``disable_dropout``): the margins it fits are those it will give.
    """
    model.train()
    with dropout_off(model):
        world = trainer.dist.world_size
        target = Target(params_of(optimizer), optimizer, scheduled=False)
        order = list(range(len(winners)))
        metrics: dict[str, float] = {}
        for epoch in range(epochs):
            rng.shuffle(order)
            loss_sum, correct = 0.0, 0.0
            for s in range(0, len(order), batch_size):
                idx = order[s : s + batch_size]

                def loss_of(rows: list[int], size: int = len(idx)):
                    loss, margins = bradley_terry_step(
                        model,
                        tokenizer,
                        [winners[i] for i in rows],
                        [losers[i] for i in rows],
                        max_length,
                    )
                    seen = {
                        "loss_sum": loss.item() * len(rows),
                        "correct": float((margins > 0).sum()),
                    }
                    # this rank's share of the batch mean; the ranks' gradients are then averaged
                    return loss * len(rows) / size * world, seen

                mine = rank_share(idx, trainer.dist)
                step = train_step(
                    trainer, target, [mine] if mine else [], loss_of, what="reward-model loss"
                )
                if step is not None:
                    loss_sum += step.total("loss_sum")
                    correct += step.total("correct")
            loss_sum = all_reduce_sum(loss_sum, trainer.dist)
            correct = all_reduce_sum(correct, trainer.dist)
            metrics = {
                "reward_model/loss": loss_sum / max(1, len(order)),
                "reward_model/accuracy": correct / max(1, len(order)),
                "reward_model/epoch": float(epoch + 1),
            }
            if log is not None:
                log(metrics)
    model.eval()
    return metrics


def params_of(optimizer: torch.optim.Optimizer) -> list:
    """Every parameter an optimizer steps, in its group order."""
    return [p for group in optimizer.param_groups for p in group["params"]]


def pair_accuracy(
    model: JointRewardModel, tokenizer, winners, losers, max_length: int | None
) -> float:
    """Fraction of pairs the model ranks correctly (winner scored strictly higher)."""
    if not winners:
        return float("nan")
    w = score_texts(model, tokenizer, winners, max_length)
    lo = score_texts(model, tokenizer, losers, max_length)
    return sum(a > b for a, b in zip(w, lo)) / len(w)
