"""What MAGRPO's ``collect`` attaches to each node sample beyond its returns: the greedy baseline
(MAReMax), the reward's KL to the reference (carried back through the turns), the reference's
per-token log-probs (KL in the loss) and the rollout policy's per-token log-probs (ratio losses).
Every computation runs without gradients, once per agent over all of a rollout's completions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from comlrl.core.dropout import dropout_off
from comlrl.core.logprobs import score
from comlrl.core.reference import estimator_for, reference_token_logps, sequence_kl
from comlrl.core.rollout.tree import TreeNode
from comlrl.reinforce.greedy import greedy_baselines
from comlrl.reinforce.kl import carried_kls


def attach_extras(trainer: Any, nodes: Sequence[TreeNode], per_agent: list[list[Any]]) -> None:
    """Fill the node samples' ``baseline``, ``reference_kls``/``carried_kls``,
    ``reference_logps`` and ``old_logps`` where the config and the policy loss use them.

    ``per_agent[i][j]`` is agent i's sample of ``nodes[j]``."""
    a = trainer.args
    if a.uses_greedy_baseline():
        for j, per_node in enumerate(greedy_baselines(trainer, nodes)):
            for samples, b in zip(per_agent, per_node):
                samples[j].baseline = b
    pads = [tok.pad_token_id for tok in trainer.tokenizers]
    if trainer.reference_models and a.reference_kl_enabled:
        estimator = estimator_for(a, "reward")
        _per_completion(
            per_agent,
            "reference_kls",
            lambda i, p, c: sequence_kl(
                trainer.agents[i],
                trainer.reference_models[i],
                p,
                c,
                pads[i],
                estimator=estimator,
                temperature=a.temperature,
            ),
        )
        for i, samples in enumerate(per_agent):
            own = [s.reference_kls for s in samples]
            for s, kls in zip(samples, carried_kls(nodes, own, i, a.discount)):
                s.carried_kls = kls
    if a.beta > 0:
        _per_completion(
            per_agent,
            "reference_logps",
            lambda i, p, c: reference_token_logps(
                trainer.reference_models[i], p, c, pads[i], a.logprob_max_tokens, a.temperature
            ),
        )
    if trainer.policy_loss.needs_old_logps:

        def old(i, p, c):
            with dropout_off(trainer.agents[i]):
                lp = score(
                    trainer.agents[i],
                    p,
                    c,
                    pad_id=pads[i],
                    max_tokens=a.logprob_max_tokens,
                    temperature=a.temperature,
                )
            return [v[: len(x)] for v, x in zip(lp.values.tolist(), c)]

        _per_completion(per_agent, "old_logps", old)


def _per_completion(
    per_agent: list[list[Any]], attr: str, compute: Callable[[int, list, list], list]
) -> None:
    """``compute(agent, prompts, completions)`` over all of an agent's completions at once,
    split back into each sample's ``attr`` (one entry per completion)."""
    for i, samples in enumerate(per_agent):
        prompts = [s.prompt_ids for s in samples for _ in s.completion_ids]
        comps = [c for s in samples for c in s.completion_ids]
        values = compute(i, prompts, comps)
        pos = 0
        for s in samples:
            setattr(s, attr, values[pos : pos + len(s.completion_ids)])
            pos += len(s.completion_ids)
