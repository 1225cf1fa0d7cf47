"""MADPO: multi-agent DPO on pairs of joint responses ranked by the task reward."""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import random
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from comlrl.core import algos
from comlrl.core.distributed import all_gather_objects
from comlrl.core.logprobs import sequence_logprobs
from comlrl.core.logprobs.budget import (
    activation_budget_bytes,
    activation_bytes_per_token,
    min_budget,
    token_budget,
)
from comlrl.core.loop import units_of
from comlrl.core.models import freeze_model, load_causal_lm
from comlrl.core.placement.devices import plan_devices
from comlrl.core.training.dropout import dropout_off
from comlrl.core.training.optim import build_adamw
from comlrl.core.training.precision import precision_like, scoring_context
from comlrl.core.training.train_step import Target, accumulate_gradients, agentwise_loss, train_step
from comlrl.pbrl import candidates
from comlrl.pbrl.base import PreferenceTrainerBase
from comlrl.pbrl.config import MADPOConfig
from comlrl.pbrl.dpo import DPOOutput
from comlrl.pbrl.pair_batches import pair_groups
from comlrl.pbrl.pairs import PreferencePair


class MADPOTrainer(PreferenceTrainerBase):
    """Multi-agent DPO (CoMLRL-compatible constructor and methods).

    Preference data is sampled once from the initial policy (``preference_num_candidates``
    aligned joint candidates per item, ranked by the task reward); DPO then runs for
    ``num_train_epochs`` epochs over the pairs. Logged: ``dpo/loss``, ``dpo/accuracy``,
    ``dpo/margin``, ``dpo/reward_margin``, chosen/rejected log-probs per agent, grad norms.

    Attributes:
        preference_pairs: the pair set (None until sampled).
        optimizers: one AdamW per agent.
    """

    algorithm_name = "MADPO"
    default_config_cls = MADPOConfig
    checkpoint_kind = "madpo"
    progress_metric = "dpo_accuracy"  # the bar shows the DPO accuracy, not a reward

    def setup(self, inputs) -> None:
        """The preference base's set-up, then the DPO optimizers."""
        super().setup(inputs)
        self._init_dpo()
        self.preference_pairs: list[PreferencePair] | None = None

    # ------------------------------------------------------------------ DPO

    def _init_dpo(self) -> None:
        """One AdamW per agent; agents sharing a model object step it once per update."""
        a = self.args
        self.optimizers = [
            build_adamw(m.parameters(), lr=a.agent_learning_rate, weight_decay=a.weight_decay)
            for m in self.agents
        ]
        # Agents that share one model object step its optimizer once per update.
        first = {}
        for i, m in enumerate(self.agents):
            first.setdefault(id(m), i)
        self._stepping = sorted(first.values())
        self.updates_seen = 0

    def compute_dpo_loss(self, pairs: Sequence[PreferencePair], *, backward: bool) -> DPOOutput:
        """The joint DPO loss of ``pairs``; with ``backward`` its gradients are accumulated
        (:func:`comlrl.core.training.train_step.accumulate_gradients`).

        Each distinct winner or loser row is scored once per group of pairs, an actor's rows
        in a few padded forwards of similar lengths. Without a ``logprob_max_tokens`` cap every
        pair is in one group; with it, pairs are grouped so each actor's rows of a group fit the
        cap, and each group's share of the loss is backpropagated before the next group is
        scored (the loss is a mean over pairs, so the gradient is the same; see
        :mod:`comlrl.pbrl.pair_batches`). A non-finite group's output is returned as it is.
        """
        groups, refs = self._dpo_plan(pairs, backward)
        if not backward:
            return self._dpo_part(pairs, groups[0], refs, grad=False)
        parts: list[DPOOutput] = []
        done = accumulate_gradients(
            self,
            groups,
            self._group_losses(pairs, refs, parts),
            what="DPO loss",
            optimizers=self.optimizers,
        )
        if done is None:
            return parts[-1]
        return _merge_parts(parts, groups, len(pairs))

    def _dpo_plan(self, pairs: Sequence[PreferencePair], grad: bool):
        """The pair groups (one without gradients) and each actor's reference log-probs of
        the winners and losers (None when reference-free)."""
        a = self.args
        n = len(pairs)
        ref_c = ref_r = None
        if not a.reference_free:
            missing = [p for p in pairs if p.reference_logps is None]
            if missing:
                self.attach_reference_logps(missing)
            ref_c = [
                torch.tensor([p.reference_logps[i][0] for p in pairs])
                for i in range(self.num_agents)
            ]
            ref_r = [
                torch.tensor([p.reference_logps[i][1] for p in pairs])
                for i in range(self.num_agents)
            ]
        budget = min_budget(token_budget(a.logprob_max_tokens, m) for m in self.agents)
        groups = pair_groups(pairs, budget) if grad else [list(range(n))]
        return groups, (ref_c, ref_r)

    def _dpo_part(self, pairs, group: list[int], refs, *, grad: bool) -> DPOOutput:
        """The DPO output of the pairs at ``group``."""
        members = [pairs[j] for j in group]
        with torch.enable_grad() if grad else torch.no_grad():
            values = [self._actor_scores(i, members, grad) for i in range(self.num_agents)]
            return self._part_of(members, group, refs, values)

    def _actor_scores(self, actor: int, members, grad: bool) -> torch.Tensor:
        """Actor ``actor``'s winner-then-loser sequence log-probs of ``members`` (``[2B]``);
        the engine scores each distinct row once."""
        values = self.sequence_logps(
            actor,
            [p.prompt_ids[actor] for p in members] * 2,
            [p.winner_ids[actor] for p in members] + [p.loser_ids[actor] for p in members],
            grad=grad,
        )
        return owned_rows(values, members, actor)

    def _part_of(self, members, group: list[int], refs, values) -> DPOOutput:
        """The registered preference loss (plus the winners' NLL term) from every actor's
        winner-then-loser log-probs."""
        a = self.args
        ref_c, ref_r = refs
        b = len(members)
        chosen = [v[:b] for v in values]
        rejected = [v[b:] for v in values]
        part = algos.get("preference_loss", a.preference_loss, "preference_loss")(
            chosen,
            rejected,
            a.dpo_beta,
            None if ref_c is None else [r[group] for r in ref_c],
            None if ref_r is None else [r[group] for r in ref_r],
        )
        if a.dpo_nll_coef:
            part.loss = part.loss + a.dpo_nll_coef * winner_nll(chosen, members)
        return part

    def _group_losses(self, pairs, refs, parts: list[DPOOutput]):
        """``loss_of`` for the step driver: a group's share of the mean loss over ``pairs``;
        each group's output is kept in ``parts``. A group that :meth:`_agentwise` picks is
        backpropagated one agent at a time (:func:`comlrl.core.training.train_step.agentwise_loss`):
        one agent's graph is alive at a time."""
        n = len(pairs)

        def loss_of(group: list[int]):
            members = [pairs[j] for j in group]
            if not self._agentwise(members):
                part = self._dpo_part(pairs, group, refs, grad=True)
                parts.append(part)
                return part.loss * (len(group) / n)

            def share(values: list[torch.Tensor]) -> torch.Tensor:
                part = self._part_of(members, group, refs, values)
                parts.append(part)
                return part.loss * (len(group) / n)

            scores = [
                functools.partial(self._actor_scores, i, members) for i in range(self.num_agents)
            ]
            return agentwise_loss(scores, share)

        return loss_of

    def _agentwise(self, members: Sequence[PreferencePair]) -> bool:
        """Whether a pair group's loss is backpropagated agent by agent (``dpo_backward``).

        ``auto`` picks it when the joint backward's graphs would hold more activations than
        one loss forward may (the budget of ``logprob_max_tokens='auto'``,
        :mod:`comlrl.core.logprobs.budget`): every agent's winner and loser rows at the
        model's bytes per token. Small models stay on the one joint backward, which saves the
        extra forward; an agent of unknown shape does too."""
        mode = self.args.dpo_backward
        if self.num_agents < 2 or mode == "joint":
            return False
        if mode == "agentwise":
            return True
        held = 0
        for i, agent in enumerate(self.agents):
            per_token = activation_bytes_per_token(agent)
            if per_token is None:
                return False
            tokens = sum(
                2 * len(p.prompt_ids[i]) + len(p.winner_ids[i]) + len(p.loser_ids[i])
                for p in members
            )
            held += tokens * per_token
        param = next(iter(self.agents[0].parameters()), None)
        device = param.device if param is not None else torch.device("cpu")
        return held > activation_budget_bytes(device)

    # ------------------------------------------------------------------ reference log-probs
    def sequence_logps(
        self, actor: int, prompt_ids, completion_ids, model=None, *, grad: bool
    ) -> torch.Tensor:
        """Summed token log-probs (EOS included, pads never) of completions under ``model``
        (default: the actor itself), in forwards of at most ``logprob_max_tokens`` tokens.

        Each distinct ``(prompt, completion)`` row is scored once (a candidate in several pairs
        gets one reference log-prob), rows packed or grouped by length
        (:func:`comlrl.core.logprobs.token_logprobs`, ``layout="packed"``). DPO scores at temperature 1
        whatever the candidates were sampled at: its loss has no importance ratio over the
        samples, and its optimum is stated for the model's own distribution."""
        model = self.agents[actor] if model is None else model
        return sequence_logprobs(
            model,
            prompt_ids,
            completion_ids,
            pad_id=self.tokenizers[actor].pad_token_id,
            max_tokens=self.args.logprob_max_tokens,
            grad=grad,
            layout="packed",
        )

    def attach_reference_logps(self, pairs: Sequence[PreferencePair]) -> None:
        """Cache reference log-probs of every pair's winner and loser, per actor.

        The reference is ``reference_model_name`` when set (loaded, used, freed), else the
        actors as they are now (before the coming updates). The time counts towards
        ``timing/update``.
        """
        if not pairs:
            return
        with self.timing.phase("update"):
            self._attach_reference_logps(pairs)

    def _attach_reference_logps(self, pairs: Sequence[PreferencePair]) -> None:
        a = self.args
        refs = None
        if a.reference_model_name is not None:
            devices = (
                plan_devices("mp", a.reference_devices, self.num_agents, "reference_devices")
                if a.reference_devices is not None
                else self.agent_devices
            )
            loaded = freeze_model(
                precision_like(
                    load_causal_lm(a.reference_model_name, self.model_config), self.agents[0]
                )
            )
            refs = [loaded.to(devices[0])] + [
                copy.deepcopy(loaded).to(d) if str(d) != str(devices[0]) else loaded
                for d in devices[1:]
            ]
        try:
            for i in range(self.num_agents):
                model = self.agents[i] if refs is None else refs[i]
                was_training = model.training
                model.eval()
                try:
                    prompts = [p.prompt_ids[i] for p in pairs] * 2
                    comps = [p.winner_ids[i] for p in pairs] + [p.loser_ids[i] for p in pairs]
                    # In the update's precision (the same autocast under bf16=True), so every
                    # margin is 0 while the policy is the reference.
                    with scoring_context(a, model):
                        values = self.sequence_logps(i, prompts, comps, model, grad=False)
                    values = values.tolist()
                finally:
                    model.train(was_training)
                n = len(pairs)
                for j, pair in enumerate(pairs):
                    if i == 0:
                        pair.reference_logps = []
                    pair.reference_logps.append([values[j], values[n + j]])
        finally:
            del refs

    def attach_reference_logps_sharded(self, pairs: Sequence[PreferencePair]) -> None:
        """:meth:`attach_reference_logps` for pairs every rank holds: each rank scores its
        share and the values are gathered (a single process scores them all)."""
        if not self.dist.is_distributed:
            self.attach_reference_logps(pairs)
            return
        mine = candidates.rank_share(pairs, self.dist)
        self.attach_reference_logps(mine)
        parts = all_gather_objects([p.reference_logps for p in mine], self.dist)
        for pair, logps in zip(pairs, [v for part in parts for v in part]):
            pair.reference_logps = logps

    def dpo_update(self, pairs: Sequence[PreferencePair]) -> dict[str, float] | None:
        """One optimizer step of every actor on ``pairs``; returns metrics (None if skipped).
        The actors score without dropout (forwards and backward, replays included), as the
        reference log-probs were taken, so at the reference every margin is 0 (TRL's DPO
        ``disable_dropout``)."""
        for m in self.agents:
            m.train()
        groups, refs = self._dpo_plan(pairs, True)
        parts: list[DPOOutput] = []
        # Every rank passes all parameters, so the gradient all-reduce lines up.
        targets = [
            Target(self.agents[i].parameters(), self.optimizers[i], i) for i in self._stepping
        ]
        with contextlib.ExitStack() as no_dropout:
            for m in {id(m): m for m in self.agents}.values():
                no_dropout.enter_context(dropout_off(m))
            step = train_step(
                self, targets, groups, self._group_losses(pairs, refs, parts), what="DPO loss"
            )
        if step is None:
            return None
        metrics = _merge_parts(parts, groups, len(pairs)).metrics(self.args.dpo_beta)
        for i, norm in zip(self._stepping, step.grad_norms):
            if not math.isnan(norm):
                metrics[f"agent_{i}/grad_norm"] = norm
        self.updates_seen += 1
        return metrics

    def update(self, pairs: Sequence[PreferencePair]) -> dict[str, float] | None:
        """One DPO update on this rank's share of a unit's pairs; returns its metrics (None
        when a non-finite loss was skipped)."""
        a = self.args
        self.reporting.offer_completions(lambda: [p.completion_row() for p in pairs])
        metrics = self.dpo_update(pairs)
        if a.use_environment_step:
            # Each rank trains on an equal share of the update's pairs.
            self.run_state.advance(a.environment_steps_per_pair * len(pairs) * self.dist.world_size)
        else:
            self.run_state.advance(1)
        if metrics is None:
            return None
        metrics["pairs/winner_reward_mean"] = float(np.mean([p.winner_reward for p in pairs]))
        metrics["pairs/loser_reward_mean"] = float(np.mean([p.loser_reward for p in pairs]))
        metrics["pairs/candidate_reward_mean"] = float(
            np.mean([p.candidate_reward_mean for p in pairs])
        )
        metrics["dpo/skipped_nonfinite"] = float(self.run_state.skipped_nonfinite)
        self.reporting.last_reward_mean = metrics["dpo/accuracy"]
        return metrics

    def epoch_order(self, num_pairs: int, epoch: int) -> list[int]:
        """The shuffled pair order of ``epoch``: a function of the seed and the epoch only, so
        a resumed run sees the same order."""
        order = list(range(num_pairs))
        random.Random(f"{self.order_seed}-{epoch}").shuffle(order)
        return order

    def dpo_units(self, pairs: Sequence[PreferencePair], epoch: int) -> list[list[int]]:
        """Batches of pair indices for one DPO epoch."""
        order = self.epoch_order(len(pairs), epoch)
        size = self.args.train_batch_size
        units = [order[s : s + size] for s in range(0, len(order), size)]
        world = self.dist.world_size
        if units and len(units[-1]) % world:
            # Ranks split every update evenly (train_batch_size is a multiple of the world
            # size); the last, short update drops its remainder so no rank idles in it.
            keep = len(units[-1]) - len(units[-1]) % world
            if epoch == 0:
                warnings.warn(
                    f"{len(units[-1]) - keep} of {len(pairs)} preference pairs are left out of "
                    f"each epoch's last update so that {world} processes get equal shares.",
                    stacklevel=2,
                )
            units[-1] = units[-1][:keep]
            if not units[-1]:
                units.pop()
        return units

    # ------------------------------------------------------------------ the contract
    def prepare(self, stage: int):
        """Sample the preference pairs once, at the first stage (a restored run has them, and
        asks for no checkpoint), then the stage's DPO updates."""
        sampled = self.prepared_stage != stage and self.preference_pairs is None
        if sampled:
            self._sample_pairs()
        self.prepared_stage = stage
        units = self.dpo_units(self.preference_pairs or [], stage)
        return units_of(units, "preference_data" if sampled else None)

    def _sample_pairs(self) -> None:
        # Under a multi-process launch each rank samples and scores its share of the items
        # (and their reference log-probs); the pairs are then gathered on every rank.
        pairs, stats, num_items = candidates.sample_policy_pairs(self)
        if not self.args.reference_free:
            self.attach_reference_logps(pairs)
        pairs, stats = candidates.gather_pairs(pairs, stats, num_items, self.dist)
        if not pairs:
            self.warn_no_pairs()
        self.preference_pairs = pairs
        self.reporting.log_record(stats)

    def collect(self, unit: list[int]) -> list[PreferencePair]:
        """This rank's share of the unit's pairs (one training unit)."""
        self.units_done += 1
        return candidates.rank_share([self.preference_pairs[i] for i in unit], self.dist)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["updates_seen"] = self.updates_seen
        state["preference_pairs"] = (
            None
            if self.preference_pairs is None
            else [p.to_record() for p in self.preference_pairs]
        )
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.updates_seen = int(state["updates_seen"])
        pairs = state["preference_pairs"]
        self.preference_pairs = (
            None if pairs is None else [PreferencePair.from_record(r) for r in pairs]
        )


def owned_rows(values: torch.Tensor, pairs: Sequence[PreferencePair], actor: int) -> torch.Tensor:
    """Actor ``actor``'s winner-then-loser log-probs, detached in the pairs another agent owns.

    A pair ranked by one agent's own reward trains that agent only: the other actors' margins
    still enter its joint margin, but as constants (no gradient), as in the factorized loss.
    """
    owners = [p.agent for p in pairs]
    if all(o is None or o == actor for o in owners) or not values.requires_grad:
        return values
    keep = torch.tensor([o is None or o == actor for o in owners] * 2, device=values.device)
    return torch.where(keep, values, values.detach())


def winner_nll(chosen: Sequence[torch.Tensor], pairs: Sequence[PreferencePair]) -> torch.Tensor:
    """Mean over ``pairs`` of the winners' negative log-likelihood per token: every actor's
    summed log-probs (``chosen[i]``, ``[B]``) over every actor's winner tokens, EOS included."""
    device = chosen[0].device
    total = torch.stack([c.to(device) for c in chosen]).sum(0)
    tokens = torch.tensor(
        [max(1, sum(len(ids) for ids in p.winner_ids)) for p in pairs],
        dtype=total.dtype,
        device=device,
    )
    return (-total / tokens).mean()


def _merge_parts(parts: list[DPOOutput], groups: list[list[int]], n: int) -> DPOOutput:
    """One output for every pair, in the pairs' order, from the outputs of pair groups."""
    if len(parts) == 1:
        return parts[0]
    order = torch.tensor([j for group in groups for j in group])
    position = torch.empty_like(order)
    position[order] = torch.arange(len(order))

    def joined(tensors: list[torch.Tensor]) -> torch.Tensor:
        values = torch.cat([t.to(tensors[0].device) for t in tensors])
        return values[position.to(values.device)]

    loss = sum(p.loss.detach() * (len(g) / n) for p, g in zip(parts, groups))
    actors = range(len(parts[0].chosen))
    return DPOOutput(
        loss=loss,
        margins=joined([p.margins for p in parts]),
        actor_margins=[joined([p.actor_margins[i] for p in parts]) for i in actors],
        chosen=[joined([p.chosen[i] for p in parts]) for i in actors],
        rejected=[joined([p.rejected[i] for p in parts]) for i in actors],
    )
