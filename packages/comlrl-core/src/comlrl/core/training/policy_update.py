"""The update half of a policy family's step, owned by core (:func:`update_policies`, the one
update driver): every agent's passes over its share of a drained buffer, mini-batches by turn
in a seeded shuffle, one optimizer step per mini-batch on the registered policy loss that
``policy_loss`` names and, for a family with a critic, the critic's step on the same
mini-batch (:mod:`comlrl.core.training.value_step`).

A family contributes what its math says about a mini-batch (:class:`PolicyRows`: each
completion's advantage and its weight in the loss, plus an optional extra loss term such as a
KL to the reference; with a critic, its value rows); core scores the rows with the log-prob
engine at the sampler's temperature, forms the ratio inputs, calls the loss and runs
:func:`~comlrl.core.training.train_step.train_step`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from comlrl.core import algos
from comlrl.core.algos.losses import padded_rows, zscore
from comlrl.core.logprobs import TokenLogprobs, token_logprobs_parts
from comlrl.core.rollout.record import RolloutGroup
from comlrl.core.training.dropout import dropout_off
from comlrl.core.training.train_step import Target, train_step
from comlrl.core.training.value_step import ValueRows, value_step

# ``extra(logps, ref_logps, row_weights) -> (term, metrics)``: a term added to a part's loss;
# ``ref_logps`` is the rows' reference log-probs padded to the part (None without them).
ExtraTerm = Callable[[TokenLogprobs, "torch.Tensor | None", torch.Tensor], tuple]


@dataclass
class PolicyRows:
    """One mini-batch as the policy loss sees it: a row per completion (its prompt and
    completion ids, advantage and weight in the loss; rollout and reference log-probs where
    the record holds them), the turn its completions answer, values to report as they are
    (``metrics``), and an optional :data:`ExtraTerm`."""

    prompts: list[list[int]]
    completions: list[list[int]]
    advantages: list[float]
    weights: list[float]
    turn: int
    old: list[list[float] | None] | None = None
    ref: list[list[float] | None] | None = None
    metrics: dict[str, list[float]] = field(default_factory=dict)
    extra: ExtraTerm | None = None
    layout: str = "auto"  # the engine's forward layout (see comlrl.core.logprobs.planning)


def group_rows(batch: Sequence[RolloutGroup], advantages: Sequence[Sequence[float]]) -> dict:
    """The per-completion columns of ``batch`` (prompts, completions, advantages, the size of
    each row's group, rollout and reference log-probs), in group order."""
    cols: dict[str, list] = {k: [] for k in ("prompts", "completions", "advantages", "sizes")}
    cols["old"], cols["ref"] = [], []
    for g, adv in zip(batch, advantages):
        for j, (c, value) in enumerate(zip(g.completion_ids, adv)):
            cols["prompts"].append(g.prompt_ids)
            cols["completions"].append(c)
            cols["advantages"].append(float(value))
            cols["sizes"].append(len(g.completion_ids))
            cols["old"].append(g.old_logps[j] if g.old_logps else None)
            cols["ref"].append(g.ref_logps[j] if g.ref_logps else None)
    return cols


def turn_minibatches(
    groups: list[RolloutGroup], batch_size: int, passes: int, rng: random.Random
) -> Iterator[list[RolloutGroup]]:
    """``passes`` passes over ``groups``: each turn's groups (turns in order) reshuffled by
    ``rng`` at every pass and cut into mini-batches of ``batch_size`` groups, so a mini-batch
    never mixes turns."""
    by_turn: dict[int, list[RolloutGroup]] = {}
    for g in groups:
        by_turn.setdefault(g.turn, []).append(g)
    for _ in range(passes):
        for turn in sorted(by_turn):
            group = by_turn[turn]
            rng.shuffle(group)
            for start in range(0, len(group), batch_size):
                yield group[start : start + batch_size]


def turn_row_minibatches(
    trainer: Any,
    groups: Sequence[RolloutGroup],
    batch_size: int,
    rng: random.Random,
    *,
    normalize: bool,
    num_turns: int,
) -> list[tuple[list[tuple[RolloutGroup, int]], list[float]]]:
    """One pass over every completion of ``groups`` as a row ``(group, k)`` with its advantage:
    rows by turn (turns in order); with ``normalize`` each turn's advantages z-scored
    (:func:`comlrl.core.algos.losses.zscore`) with moments pooled over ranks, one collective of a
    fixed shape (turns ``0..num_turns``) whichever turns this rank's share holds; then each
    turn's rows shuffled by ``rng`` and cut into mini-batches of ``batch_size`` rows, so a
    mini-batch never mixes turns."""
    by_turn: dict[int, list[tuple[RolloutGroup, int]]] = {}
    for g in groups:
        for k in range(len(g.completion_ids)):
            by_turn.setdefault(g.turn, []).append((g, k))
    pooled = None
    if normalize:
        moments = [
            torch.tensor([float(g.advantages[k]) for g, k in by_turn.get(t, [])])
            for t in range(num_turns + 1)
        ]
        pooled = trainer.sync.pooled_moments(moments)
    batches = []
    for turn in sorted(by_turn):
        rows = by_turn[turn]
        advs = [float(g.advantages[k]) for g, k in rows]
        if normalize:
            scored = torch.tensor(advs, dtype=torch.float64)
            advs = zscore(scored, pooled[turn] if pooled else None).tolist()
        pairs = list(zip(rows, advs))
        rng.shuffle(pairs)
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start : start + batch_size]
            batches.append(([p[0] for p in chunk], [p[1] for p in chunk]))
    return batches


def require_old_logps(config: Any, old: Sequence[Any]) -> None:
    """Refuse a ratio loss on samples without rollout log-probs (``old[i]`` None), naming
    ``policy_loss`` and how many samples lack them."""
    missing = sum(1 for r in old if r is None)
    if missing:
        raise ValueError(
            f"policy_loss={config.policy_loss!r} needs each sample's rollout log-probs "
            f"(old_logps), but {missing} of {len(old)} samples have none; they are taken at "
            "rollout when a ratio loss is set before the buffer fills."
        )


def _as_tensor(values: Sequence[float], device) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.float32, device=device)


def policy_step(
    trainer: Any,
    agent: int,
    rows: PolicyRows,
    *,
    optimizer: Any = None,
    what: str | None = None,
) -> tuple | None:
    """One optimizer step of ``agent`` on ``rows``: one forward per micro-batch (a node's
    completions share its prompt, which the planner encodes once where that pays), the
    registered policy loss plus ``rows.extra`` on each, gradients accumulated, dropout off
    (the rollout sampled and its log-probs were taken without it, so a first pass's ratio is
    1). ``optimizer`` defaults to ``trainer.optimizers[agent]``; ``what`` names the loss in
    the non-finite messages. Returns the loss, the gradient norm and the mean of every
    reported value, or None when a non-finite loss skipped the step."""
    a = trainer.args
    model = trainer.agents[agent]
    opt = trainer.optimizers[agent] if optimizer is None else optimizer
    loss_fn = algos.get("policy_loss", a.policy_loss, "policy_loss")
    needs_old = getattr(loss_fn, "needs_old_logps", False)
    if needs_old:
        require_old_logps(a, rows.old or [None] * len(rows.completions))
    old_rows, ref_rows = rows.old, rows.ref
    with_ref = ref_rows is not None and all(r is not None for r in ref_rows)
    parts = token_logprobs_parts(
        model,
        rows.prompts,
        rows.completions,
        pad_id=trainer.tokenizers[agent].pad_token_id,
        max_tokens=a.logprob_max_tokens,
        dedupe=False,
        layout=rows.layout,
        temperature=a.temperature,  # the rollout's sampler, as the old and reference scores
    )

    def part_loss(part):
        idx, lp = part
        device, width = lp.values.device, lp.values.shape[1]
        old = None
        if needs_old and old_rows is not None:  # require_old_logps checked that they are there
            old = padded_rows([old_rows[i] for i in idx], width, device)
        row_w = _as_tensor([rows.weights[i] for i in idx], device)
        adv = _as_tensor([rows.advantages[i] for i in idx], device)
        loss, metrics = loss_fn(lp, old, adv, row_w, a)
        if rows.extra is not None:
            ref = None
            if with_ref and ref_rows is not None:
                ref = padded_rows([ref_rows[i] for i in idx], width, device)
            term, more = rows.extra(lp, ref, row_w)
            loss, metrics = loss + term, {**metrics, **more}
        return loss, metrics

    # The parts run their forwards as they are drawn, so inside the scope.
    with dropout_off(model):
        step = train_step(
            trainer,
            Target(model.parameters(), opt, agent, turn=rows.turn),
            parts,
            part_loss,
            what=what or f"{trainer.algorithm_name} loss of agent {agent}",
        )
    if step is None:
        return None
    found = {key: list(values) for key, values in rows.metrics.items()}
    for key, values in step.metrics.items():
        found.setdefault(key, []).extend(values)
    return step.loss, step.grad_norm, {key: float(np.mean(v)) for key, v in found.items()}


# ``rows_of(agent, batch)``: the family's PolicyRows of one mini-batch (see ``unit``).
RowsOf = Callable[[int, Any], PolicyRows]
# ``step(agent, batch) -> (loss, grad_norm, metrics) | None``: a family's own step in place of
# the policy step (the actor-critic family's value head on the actor: one forward, two losses).
StepOf = Callable[[int, Any], "tuple | None"]
# ``critic(agent, batch) -> ValueRows | None``: a critic step after each policy step, on the
# same mini-batch (None: no critic step for this one).
CriticOf = Callable[[int, Any], "ValueRows | None"]
UNITS = ("group", "row")


def agent_minibatches(
    trainer: Any, groups: list[RolloutGroup], unit: str, rng: random.Random
) -> list:
    """Every mini-batch of ``num_iterations`` passes over one agent's groups, by turn, in a
    seeded shuffle: of ``train_batch_size`` groups (``unit="group"``, :func:`turn_minibatches`)
    or of ``train_batch_size`` completions with their advantages, z-scored per turn when
    ``advantage_normalization`` (``unit="row"``, :func:`turn_row_minibatches`)."""
    a = trainer.args
    if unit == "group":
        return list(turn_minibatches(groups, a.train_batch_size, a.num_iterations, rng))
    if unit != "row":
        raise ValueError(f"unit must be one of {list(UNITS)}, got {unit!r}.")
    return [
        batch
        for _ in range(a.num_iterations)
        for batch in turn_row_minibatches(
            trainer,
            groups,
            a.train_batch_size,
            rng,
            normalize=a.advantage_normalization,
            num_turns=a.num_turns,
        )
    ]


def update_policies(
    trainer: Any,
    per_agent: Sequence[list[RolloutGroup]],
    rows_of: RowsOf | None = None,
    *,
    reported: Sequence[dict[str, list[float]]] | None = None,
    unit: str = "group",
    step: StepOf | None = None,
    critic: CriticOf | None = None,
    label: str = "loss of agent {agent}",
) -> list[dict[str, float]]:
    """The one update driver: every agent's update from its groups (concurrently across
    devices in ``mp`` mode), ``num_iterations`` passes of mini-batches by turn in a seeded
    shuffle (:func:`agent_minibatches`, ``unit`` says of what), one step per mini-batch: the
    :func:`policy_step` of ``rows_of(agent, batch)`` (or the family's ``step``), then, with
    ``critic``, the :func:`~comlrl.core.training.value_step.value_step` of ``critic(agent,
    batch)``. The policy steps run without dropout (the gradient is of the policy that
    sampled, and its rollout log-probs were taken without dropout, so a first pass's ratio is
    exactly 1). ``label`` (with ``{agent}``) names the loss in the non-finite messages.

    Returns each agent's mean ``loss``, ``grad_norm``, ``critic_loss`` (with ``critic``) and
    reported values; ``reported[i]`` holds values the family measured before the update (they
    join agent ``i``'s means). Reads the trainer's ``agents``, ``optimizers`` (one per agent),
    ``tokenizers``, ``workers``, ``shuffle_rng`` and ``args`` (``policy_loss``,
    ``num_iterations``, ``train_batch_size``, ``logprob_max_tokens``, ``temperature``)."""
    # Drawn here, in agent order, so that the shuffles are reproducible in mp mode too.
    seeds = [trainer.shuffle_rng.getrandbits(64) for _ in range(trainer.num_agents)]
    reported = list(reported) if reported is not None else [{} for _ in per_agent]
    what = trainer.algorithm_name + " " + label

    def policy(agent: int, batch) -> tuple | None:
        if rows_of is None:
            raise ValueError("update_policies needs rows_of or step.")
        return policy_step(trainer, agent, rows_of(agent, batch), what=what.format(agent=agent))

    take_step = step or policy

    def run(agent: int, arg) -> dict[str, float]:
        groups, seed, found = arg
        model = trainer.agents[agent]
        model.train()
        losses, norms = [], []
        extra = {key: list(values) for key, values in found.items()}
        batches = agent_minibatches(trainer, groups, unit, random.Random(seed))
        with dropout_off(model):
            for batch in batches:
                done = take_step(agent, batch)
                if done is not None:
                    losses.append(done[0])
                    norms.append(done[1])
                    for key, value in done[2].items():
                        extra.setdefault(key, []).append(value)
                value_rows = critic(agent, batch) if critic is not None else None
                if value_rows is not None:
                    err = value_step(trainer, value_rows)
                    errors = extra.setdefault("critic_loss", [])
                    if err is not None:
                        errors.append(err)
        return {
            "loss": mean_or_nan(losses),
            "grad_norm": mean_or_nan(norms),
            **{key: mean_or_nan(values) for key, values in extra.items()},
        }

    return trainer.workers.map(run, list(zip(per_agent, seeds, reported)))


def mean_or_nan(values: Sequence[float]) -> float:
    """The mean of steps' values, or NaN where every step was skipped."""
    return float(np.mean(values)) if values else float("nan")
