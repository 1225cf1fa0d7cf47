"""Core's pieces of a policy family's update, which the family's ``update`` calls in a short
loop of its own (:meth:`comlrl.reinforce.magrpo.MAGRPOTrainer.update` reads top to bottom):

- :func:`agent_rngs`: each agent's seeded shuffle, drawn in agent order;
- :func:`minibatches`: ``num_iterations`` passes over one agent's groups, by turn, in that
  shuffle, of groups (``unit="group"``) or of completions with their advantages z-scored per
  turn (``unit="row"``);
- :func:`policy_step`: one optimizer step of an agent on a mini-batch's :class:`PolicyRows`
  (each completion's advantage and weight in the loss, the KL-to-reference coefficient): the
  log-prob engine scores the rows at the sampler's temperature, the registered ``policy_loss``
  and the KL term make the loss, and :func:`~comlrl.core.training.train_step.train_step` runs
  the backward and the optimizer step;
- :class:`UpdateLog`: one agent's steps summed up into the metrics the update reports.

A critic's step on the same mini-batch is :func:`comlrl.core.training.value_step.value_step`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from comlrl.core import algos
from comlrl.core.algos.losses import kl_penalty, padded_rows, zscore
from comlrl.core.distributed.gradients import GradientSync
from comlrl.core.logprobs import token_logprobs_parts
from comlrl.core.rollout.record import RolloutGroup
from comlrl.core.training.dropout import dropout_off
from comlrl.core.training.host import PolicyHost
from comlrl.core.training.train_step import Target, train_step


@dataclass
class PolicyRows:
    """One mini-batch as the policy loss sees it: a row per completion (its prompt and
    completion ids, advantage and weight in the loss; rollout and reference log-probs where
    the record holds them), the turn its completions answer, values to report as they are
    (``metrics``), and the KL-to-reference term of the loss: ``kl_coef * sum_r w_r * sum_t
    KL_t`` with ``kl_estimator`` (none at ``kl_coef=0``; it needs ``ref``)."""

    prompts: list[list[int]]
    completions: list[list[int]]
    advantages: list[float]
    weights: list[float]
    turn: int
    old: list[list[float] | None] | None = None
    ref: list[list[float] | None] | None = None
    metrics: dict[str, list[float]] = field(default_factory=dict)
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
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
    sync: GradientSync | None,
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
    fixed shape (turns ``0..num_turns``) whichever turns this rank's share holds (``sync``; None
    in one process); then each
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
        pooled = sync.pooled_moments(moments) if sync is not None else None
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
    host: PolicyHost,
    agent: int,
    rows: PolicyRows,
    *,
    optimizer: Any = None,
    what: str | None = None,
) -> tuple[float, float, dict[str, float]] | None:
    """One optimizer step of ``agent`` on ``rows``: one forward per micro-batch (a node's
    completions share its prompt, which the planner encodes once where that pays), the
    registered policy loss plus the KL term on each, gradients accumulated, dropout off
    (the rollout sampled and its log-probs were taken without it, so a first pass's ratio is
    1). ``optimizer`` defaults to the agent's; ``what`` names the loss in the non-finite
    messages. Returns the loss, the gradient norm and the mean of every reported value, or None
    when a non-finite loss skipped the step."""
    a = host.args
    model = host.agents[agent]
    opt = host.optimizers[agent] if optimizer is None else optimizer
    loss_fn = algos.get("policy_loss", a.policy_loss, "policy_loss")
    needs_old = getattr(loss_fn, "needs_old_logps", False)
    if needs_old:
        require_old_logps(a, rows.old or [None] * len(rows.completions))
    old_rows = rows.old if needs_old else None
    ref_rows = rows.ref if rows.kl_coef > 0 else None
    if rows.kl_coef > 0 and (ref_rows is None or any(r is None for r in ref_rows)):
        raise ValueError(
            f"a KL term in the loss (beta={rows.kl_coef}) needs each sample's reference "
            "log-probs, which the rollout takes when the trainer has reference models."
        )
    parts = token_logprobs_parts(
        model,
        rows.prompts,
        rows.completions,
        pad_id=host.tokenizers[agent].pad_token_id,
        max_tokens=a.logprob_max_tokens,
        dedupe=False,
        layout=rows.layout,
        temperature=a.temperature,  # the rollout's sampler, as the old and reference scores
    )

    def part_loss(part):
        idx, lp = part
        device, width = lp.values.device, lp.values.shape[1]
        old = None
        if old_rows is not None:  # require_old_logps checked that every row has them
            old = padded_rows([old_rows[i] for i in idx], width, device)
        row_w = _as_tensor([rows.weights[i] for i in idx], device)
        adv = _as_tensor([rows.advantages[i] for i in idx], device)
        loss, metrics = loss_fn(lp, old, adv, row_w, a)
        if ref_rows is not None:
            ref = padded_rows([ref_rows[i] for i in idx], width, device)
            term, kl = kl_penalty(lp, ref, row_w, rows.kl_coef, rows.kl_estimator)
            loss, metrics = loss + term, {**metrics, **kl}
        return loss, metrics

    # The parts run their forwards as they are drawn, so inside the scope.
    with dropout_off(model):
        step = train_step(
            host,
            Target(model.parameters(), opt, agent, turn=rows.turn),
            parts,
            part_loss,
            what=what or f"{host.algorithm_name} loss of agent {agent}",
        )
    if step is None:
        return None
    found = {key: list(values) for key, values in rows.metrics.items()}
    for key, values in step.metrics.items():
        found.setdefault(key, []).extend(values)
    return step.loss, step.grad_norm, {key: float(np.mean(v)) for key, v in found.items()}


UNITS = ("group", "row")


def agent_rngs(shuffle_rng: random.Random, num_agents: int) -> list[random.Random]:
    """Each agent's mini-batch shuffle for one update, seeded from ``shuffle_rng`` in agent
    order (so the shuffles are the same whether the agents update one after another or
    concurrently on their devices)."""
    return [random.Random(shuffle_rng.getrandbits(64)) for _ in range(num_agents)]


def minibatches(
    groups: list[RolloutGroup],
    config: Any,
    rng: random.Random,
    *,
    unit: str = "group",
    sync: GradientSync | None = None,
) -> list:
    """Every mini-batch of ``num_iterations`` passes over one agent's groups, by turn, in
    ``rng``'s shuffle: of ``train_batch_size`` groups (``unit="group"``,
    :func:`turn_minibatches`) or of ``train_batch_size`` completions with their advantages,
    z-scored per turn with moments pooled over ranks (``sync``) when
    ``advantage_normalization`` (``unit="row"``, :func:`turn_row_minibatches`)."""
    if unit == "group":
        return list(turn_minibatches(groups, config.train_batch_size, config.num_iterations, rng))
    if unit != "row":
        raise ValueError(f"unit must be one of {list(UNITS)}, got {unit!r}.")
    return [
        batch
        for _ in range(config.num_iterations)
        for batch in turn_row_minibatches(
            sync,
            groups,
            config.train_batch_size,
            rng,
            normalize=config.advantage_normalization,
            num_turns=config.num_turns,
        )
    ]


class UpdateLog:
    """One agent's update, step by step, summed up as the metrics it reports: the mean
    ``loss`` and ``grad_norm`` of the steps taken (NaN where every step was skipped), then
    the mean of each other value, in the order first seen (``reported`` first: values the
    family measured before the update)."""

    def __init__(self, reported: dict[str, list[float]] | None = None):
        self.losses: list[float] = []
        self.norms: list[float] = []
        self.values = {key: list(v) for key, v in (reported or {}).items()}

    def step(self, done: tuple[float, float, dict[str, float]] | None) -> None:
        """Record a :func:`policy_step`'s result (None: a skipped step, nothing to add)."""
        if done is None:
            return
        self.losses.append(done[0])
        self.norms.append(done[1])
        for key, value in done[2].items():
            self.values.setdefault(key, []).append(value)

    def value(self, key: str, value: float | None) -> None:
        """Record one value under ``key`` (None: a skipped step, the key is still reported)."""
        found = self.values.setdefault(key, [])
        if value is not None:
            found.append(float(value))

    def means(self) -> dict[str, float]:
        """``loss``, ``grad_norm`` and every recorded value, each averaged over its steps."""
        return {
            "loss": mean_or_nan(self.losses),
            "grad_norm": mean_or_nan(self.norms),
            **{key: mean_or_nan(values) for key, values in self.values.items()},
        }


def mean_or_nan(values: Sequence[float]) -> float:
    """The mean of steps' values, or NaN where every step was skipped."""
    return float(np.mean(values)) if values else float("nan")
