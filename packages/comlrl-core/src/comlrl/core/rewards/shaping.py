"""Reward transforms that run on a rollout tree before its returns: KL to the reference.

KL shaping (``reference_kl_enabled``) takes ``reference_kl_coef * KL`` of an agent's completion
from that agent's reward of every joint action the completion is part of. The tree's one return
recursion (:func:`comlrl.core.rollout.tree.compute_returns`) then carries the penalty back
through the turns exactly as it carries rewards, so no family writes a KL recursion of its own.
The environment's rewards and shared returns stay as they were, for the logged reward metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from comlrl.core.algos.losses import estimator_for
from comlrl.core.logprobs import micro_batches
from comlrl.core.logprobs.budget import token_budget
from comlrl.core.models.reference import sequence_kl
from comlrl.core.rollout.tree import TreeNode, compute_returns
from comlrl.core.training.precision import scoring_context

if TYPE_CHECKING:
    from comlrl.core.trainer import TrainerBase


def completion_kls(trainer: TrainerBase, nodes: Sequence[TreeNode]) -> list[list[list[float]]]:
    """``[agent][node][k]``: the reward-side KL estimate of each completion to the agent's
    reference, tempered at the sampler's temperature and in the update's precision (both models
    under the same autocast with ``bf16=True``, so the KL of the initial policy is 0). Each agent's completions are measured
    together, in forwards within the token budget (agents concurrently in mp mode)."""
    a = trainer.args
    estimator = estimator_for(a, "reward")

    def run(i: int, _arg) -> list[list[float]]:
        prompts = [
            list(n.samples[i].prompt_ids) for n in nodes for _ in n.samples[i].completion_ids
        ]
        comps = [list(c) for n in nodes for c in n.samples[i].completion_ids]
        flat = [0.0] * len(comps)
        lengths = [len(p) + len(c) for p, c in zip(prompts, comps)]
        budget = token_budget(a.logprob_max_tokens, trainer.agents[i])
        for idx in micro_batches(lengths, budget):
            with scoring_context(a, trainer.agents[i]):
                part = sequence_kl(
                    trainer.agents[i],
                    trainer.reference_models[i],
                    [prompts[j] for j in idx],
                    [comps[j] for j in idx],
                    trainer.tokenizers[i].pad_token_id,
                    estimator=estimator,
                    temperature=a.temperature,
                )
            for j, kl in zip(idx, part):
                flat[j] = float(kl)
        out, pos = [], 0
        for n in nodes:
            k = len(n.samples[i].completion_ids)
            out.append(flat[pos : pos + k])
            pos += k
        return out

    return trainer.workers.map(run)


def shape_with_kl(
    roots: Sequence[TreeNode],
    nodes: Sequence[TreeNode],
    kls: Sequence[Sequence[Sequence[float]]],
    coef: float,
    discount: float,
) -> None:
    """Set every node's penalties to ``coef`` times the KL of each agent's completion in each
    joint action (``kls`` as :func:`completion_kls` returns), then recompute the returns of the
    trees at ``roots``. ``nodes`` are the trees' nodes in the order ``kls`` lists them."""
    for j, node in enumerate(nodes):
        node.penalties = [
            [coef * kls[i][j][k] for i, k in enumerate(action)] for action in node.joint_actions
        ]
    for root in roots:
        compute_returns(root, discount)


def apply_kl_shaping(
    trainer: TrainerBase,
    roots: Sequence[TreeNode],
    nodes: Sequence[TreeNode],
    discount: float | None = None,
):
    """KL shaping of a training rollout when the config asks for it (``reference_kl_enabled``
    with reference models), with the returns recomputed at ``discount``; returns the
    per-completion KLs (``[agent][node][k]``) it took, or None when it shaped nothing.

    The trees come with returns at ``args.discount``, the default. A family that wants its
    returns at another discount (the actor-critic family logs the undiscounted reward-to-go)
    passes it, and gets them recomputed even when nothing is shaped."""
    a = trainer.args
    gamma = a.discount if discount is None else discount
    if not (a.reference_kl_enabled and trainer.reference_models):
        if gamma != a.discount:
            for root in roots:
                compute_returns(root, gamma)
        return None
    kls = completion_kls(trainer, nodes)
    shape_with_kl(roots, nodes, kls, a.reference_kl_coef, gamma)
    return kls
