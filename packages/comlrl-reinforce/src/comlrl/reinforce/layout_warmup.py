"""Layout warm-up for centralized MAGRPO: teach the joint writer the adapter's layout first.

A model that has never seen the tagged layout rarely samples it, and a joint completion without
the layout earns no reward, so RL alone may never start. The warm-up is a short supervised
phase on the model's *own* answers: the writer answers every role's own prompt separately, the
adapter lays those answers out as one joint completion, and the writer is trained to produce
that completion from the joint prompt. It teaches the layout only; no reward is involved, and
the answers' content is the model's own.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from comlrl.core.distributed import item_seed
from comlrl.core.logprobs import token_logprobs
from comlrl.core.rollout import rollouts
from comlrl.core.rollout.chat import encode_prompts
from comlrl.core.rollout.formatters import build_formatters, template_formatters
from comlrl.core.training.optim import build_adamw
from comlrl.core.training.train_step import Target, train_step

WARMUP_BATCH = 8


def layout_targets(trainer: Any, items: list[dict]) -> list[tuple[list[int], list[int]]]:
    """(joint prompt ids, joint completion ids) pairs: every combination of the writer's
    ``num_generations`` answers to each role's own prompt, per item, laid out by the adapter."""
    adapter, collab = trainer.centralized_adapter, trainer.collaboration
    tokenizer = trainer.tokenizers[0]
    roles = collab.num_roles
    formatters = template_formatters(
        build_formatters(collab.role_formatters, roles), [tokenizer] * roles, trainer.args
    )
    # The layout's own tokens share the joint budget with the answers.
    overhead = len(tokenizer(adapter.format_completion([""] * roles))["input_ids"])
    params = dataclasses.replace(
        rollouts.sampling_params(trainer),
        max_new_tokens=max(1, (trainer.args.max_new_tokens - overhead) // roles),
    )
    k = trainer.args.num_generations
    seed = trainer.args.seed if trainer.args.seed is not None else 0
    answers = []
    for r in range(roles):
        prompts = [formatters[r](item) for item in items]
        seeds = [item_seed(seed + 7919, j, r) for j in range(len(items))]
        samples = trainer.rollout_backend.generate(0, prompts, k, params, seeds)
        answers.append([[t.strip() for t in s.texts] for s in samples])
    joint_ids = encode_prompts(tokenizer, [trainer.formatters[0](item) for item in items])
    eos = tokenizer.eos_token_id
    pairs = []
    for j in range(len(items)):
        for g in range(k**roles):
            picks = [answers[r][j][(g // k**r) % k] for r in range(roles)]
            text = adapter.format_completion(picks)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            pairs.append((joint_ids[j], ids + ([eos] if eos is not None else [])))
    return pairs


def warm_up_layout(trainer: Any, steps: int) -> dict[str, float]:
    """Run ``steps`` supervised steps of :data:`WARMUP_BATCH` layout targets each (see the
    module docstring) with their own AdamW (``layout_warmup_learning_rate``); returns the first and
    last step's mean token negative log-likelihood."""
    if not callable(getattr(trainer.centralized_adapter, "format_completion", None)):
        raise ValueError(
            "layout_warmup_steps: the centralized adapter needs format_completion(outputs) to "
            "lay out warm-up targets; set layout_warmup_steps=0 or use an adapter that has it."
        )
    items = list(trainer.train_dataset)
    pairs = layout_targets(trainer, items)
    model = trainer.agents[0]
    pad = trainer.tokenizers[0].pad_token_id
    lr = trainer.args.layout_warmup_learning_rate or trainer.args.agent_learning_rate
    optimizer = build_adamw(model.parameters(), lr=lr)
    rng = random.Random(trainer.args.seed)
    was_training = model.training
    model.train()
    losses = []

    def nll(batch):
        logps = token_logprobs(
            model, [p for p, _ in batch], [c for _, c in batch], pad_id=pad, grad=True
        )
        mask = logps.mask.to(logps.values.dtype)
        return -(logps.values * mask).sum() / mask.sum().clamp(min=1.0)

    for _ in range(steps):
        batch = rng.sample(pairs, min(WARMUP_BATCH, len(pairs)))
        target = Target(model.parameters(), optimizer, agent=0)
        step = train_step(trainer, target, [batch], nll, what="layout warm-up loss")
        if step is not None:
            losses.append(step.loss)
    model.train(was_training)
    if not losses:
        return {}
    return {"centralized/warmup_nll_first": losses[0], "centralized/warmup_nll_last": losses[-1]}
