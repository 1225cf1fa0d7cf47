"""What every preference trainer shares: construction, candidate sampling and scoring, pair
building, and the staged training loop with checkpoints.

A run is a list of *stages* (epochs for MADPO and MARLHF, iterations for the iterative trainers).
A stage may first *prepare* data (sample candidates, build pairs, train a reward model) and then
runs *units* of training (one DPO update, or one RL batch). The cursor ``(stage, unit)`` is what a
checkpoint resumes from, and prepared data lives in the family state, so a resumed run never
samples its preference data again.
"""

from __future__ import annotations

import copy
import math
import random
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from comlrl.core import loop
from comlrl.core.centralized import (
    CentralizedCollaboration,
    TaggedCentralizedComparatorAdapter,
    centralize,
    check_adapter,
)
from comlrl.core.devices import plan_devices
from comlrl.core.distributed import all_gather_objects, resolve_mode, shard_range
from comlrl.core.input_checks import check_agent_count
from comlrl.core.inputs import MAGRPO_STYLE, TrainerInputs, compat_constructor, signature_of
from comlrl.core.loop import units_of
from comlrl.core.models import freeze_model, load_causal_lm
from comlrl.core.rewards import RewardCaller, RewardError
from comlrl.core.rollout.generation import PromptSamples
from comlrl.core.trainer import TrainerBase
from comlrl.pbrl.config import MADPOConfig
from comlrl.pbrl.pair_batches import row_logps
from comlrl.pbrl.pairs import PreferencePair, candidate_pairs, select_pairs


@dataclass
class PreferenceInputs(TrainerInputs):
    """The trainer inputs plus the adapter of centralized collaboration."""

    centralized_comparator_adapter: Any = None


class PreferenceTrainerBase(TrainerBase):
    """Shared constructor and loop of MADPO, MARLHF and their iterative variants.

    The constructor takes CoMLRL's MAGRPO arguments plus ``centralized_comparator_adapter``. With
    ``args.collaboration_mode="centralized"`` one actor model writes every role's output (the
    adapter builds its prompt and splits its completion); ``args.num_agents`` then counts roles.
    """

    algorithm_name = "Preference"
    default_config_cls: type = MADPOConfig
    checkpoint_kind = "preference"
    # Whether the family shards its preference data across ranks and averages its gradients
    # (every built-in preference trainer does; a subclass with its own loop may say no).
    multi_process_ready = True
    inputs_cls = PreferenceInputs
    __init__ = compat_constructor(
        signature_of(MAGRPO_STYLE, keyword_only=("centralized_comparator_adapter", "model")),
        PreferenceInputs,
    )
    progress_unit = "step"
    run_config_keys = TrainerBase.run_config_keys + (
        "preference_num_candidates",
        "preference_pairs_per_sample",
        "pair_selection",
        "dpo_beta",
        "reference_free",
        "collaboration_mode",
    )
    timing_idle_throughput = True

    @classmethod
    def supports_multi_process(cls) -> bool:
        """Whether this trainer may run under a multi-process launch (MADPO)."""
        return cls.multi_process_ready

    def fsdp_unsupported_reason(self, args) -> str | None:
        """The preference trainers replicate their agents (DDP-style) only."""
        return "the preference trainers do not shard their agents"

    def setup(self, inputs: PreferenceInputs) -> None:
        """Check the config, rewrite a centralized run as one actor, then build the actors."""
        args = inputs.args if inputs.args is not None else self.default_config_cls()
        if not isinstance(args, self.default_config_cls):
            raise ValueError(
                f"args must be a {self.default_config_cls.__name__}, got {type(args).__name__}."
            )
        adapter = check_adapter(
            inputs.centralized_comparator_adapter
            if inputs.centralized_comparator_adapter is not None
            else TaggedCentralizedComparatorAdapter(),
            "centralized_comparator_adapter",
        )
        self.centralized_comparator_adapter = adapter
        self.user_formatters = inputs.formatters
        self._model_config_arg = inputs.model_config
        self.task_reward_func = inputs.reward_func
        self.collaboration: CentralizedCollaboration | None = None
        actor_inputs = inputs.replace(args=args)
        if args.collaboration_mode == "centralized":
            actor_inputs, _, self.collaboration = centralize(inputs, args, adapter)
            self.num_roles = self.collaboration.num_roles
        elif inputs.agents is not None and inputs.agent_model is None:
            check_agent_count(inputs.agents, inputs.num_agents, type(self))
            actor_inputs = actor_inputs.replace(num_agents=None)
        if not self.supports_multi_process() and resolve_mode(args.distributed_mode) != "single":
            # Refused before any model is loaded.
            raise ValueError(
                f"{self.algorithm_name} runs in one process; this trainer does not train under "
                "a multi-process launch (accelerate/torchrun, WORLD_SIZE > 1). "
                "Start it as a plain Python process (mp placement of agents on several GPUs "
                "works: parallel_training='mp'), or set distributed_mode='single'."
            )
        self._validate_before_loading(
            args,
            agent_model=inputs.agent_model,
            agents=inputs.agents,
            num_agents=actor_inputs.num_agents,
        )
        super().setup(actor_inputs)
        self.args = self.global_args = args
        if not args.reference_free and args.reference_devices is not None:
            plan_devices("mp", args.reference_devices, self.num_agents, "reference_devices")
        if self.collaboration is None:
            self.num_roles = self.num_agents
        # Rewards are scored raw (for the distribution logger) and processed here.
        self.reward_caller = RewardCaller(
            self.reward_func, num_agents=self.num_agents, call_mode=args.reward_call_mode
        )
        seed = args.seed if args.seed is not None else 0
        self.pair_rng = random.Random(seed)
        self.order_seed = seed
        self.units_done = 0
        self.prepared_stage: int | None = None
        self.cursor = (0, 0)

    # ------------------------------------------------------------------ hooks
    def _validate_before_loading(self, args, *, agent_model, agents, num_agents) -> None:
        """Cheap checks a family runs before any model is loaded: here, that a DPO reference
        model's source resolves (its config is read; the weights load only when used)."""
        name = getattr(args, "reference_model_name", None)
        if name is not None and not args.reference_free:
            from transformers import AutoConfig

            try:
                AutoConfig.from_pretrained(
                    name,
                    trust_remote_code=bool(
                        (self._model_config_arg or {}).get("trust_remote_code", False)
                    ),
                )
            except OSError as exc:
                raise ValueError(
                    f"reference_model_name={name!r} cannot be found (not a local model directory "
                    f"nor a reachable hub id): {exc}"
                ) from exc

    def _prepare_stage(self, stage: int) -> bool:
        """Build the data stage ``stage`` trains on; return True when data was sampled (a
        checkpoint is then written at once). Restored data is not sampled again."""
        return False

    def _stage_units(self, stage: int) -> list[Any]:
        """The units of training of ``stage``, in order."""
        raise NotImplementedError

    def _run_unit(self, unit: Any) -> None:
        raise NotImplementedError

    def _unit_trains(self, unit: Any) -> bool:
        """Whether ``unit`` is a training step (eval cadence counts those)."""
        return True

    def _finish_stage(self, stage: int) -> None:
        """Hook after the last unit of a stage."""

    # ------------------------------------------------------------------ rewards
    @property
    def reward_range(self):
        """The task reward's declared ``(low, high)`` range, or None."""
        if self.collaboration is not None:
            return self.collaboration.reward_range
        return self.reward_caller.reward_range

    def process_rewards(self, raw: Sequence[float]) -> list[float]:
        """Apply ``reward_processor`` to raw rewards; outputs must be finite numbers."""
        if self.reward_processor is None:
            return [float(r) for r in raw]
        out = []
        for value in raw:
            result = self.reward_processor(value)
            try:
                result = float(result)
            except (TypeError, ValueError) as exc:
                raise RewardError(
                    f"reward_processor returned {result!r} for reward {value!r}; it must return "
                    "a number."
                ) from exc
            if not math.isfinite(result):
                raise RewardError(
                    f"reward_processor produced a non-finite value {result!r} for reward {value!r}."
                )
            out.append(result)
        return out

    def score_raw(self, agent_completions, *, prompts, batch_items) -> list[float]:
        """Unprocessed task rewards of a batch of joint actions (one reward call)."""
        with self.timed("reward"):
            return self.reward_caller(agent_completions, prompts=prompts, batch_items=batch_items)

    def score(self, agent_completions, *, prompts, batch_items) -> list[float]:
        """Processed task rewards (used by eval rollouts)."""
        return self.process_rewards(
            self.score_raw(agent_completions, prompts=prompts, batch_items=batch_items)
        )

    # ------------------------------------------------------------------ candidates
    def sample_candidates(
        self, items: Sequence[dict], num_samples: int, params
    ) -> list[list[PromptSamples]]:
        """``[actor][item]`` samples of the current policy for each item's prompts."""
        prompts = [[self.formatters[i](item) for item in items] for i in range(self.num_agents)]
        return self.generate_per_agent(prompts, num_samples, params)

    def score_joint(
        self, texts: list[list[list[str]]], prompts: list[str], items: Sequence[dict]
    ) -> tuple[list[list[float]], list[list[float]]]:
        """Score aligned joint candidates in one reward call.

        ``texts[i][j][k]`` is actor ``i``'s ``k``-th candidate for item ``j``; candidate ``k`` of
        item ``j`` is the joint action ``(texts[0][j][k], ..., texts[N-1][j][k])``. Returns raw and
        processed rewards as ``[item][k]``.
        """
        counts = [len(texts[0][j]) for j in range(len(items))]
        comps = [[t for j in range(len(items)) for t in texts[i][j]] for i in range(len(texts))]
        flat_prompts = [prompts[j] for j in range(len(items)) for _ in range(counts[j])]
        flat_items = [items[j] for j in range(len(items)) for _ in range(counts[j])]
        raw = self.score_raw(comps, prompts=flat_prompts, batch_items=flat_items)
        processed = self.process_rewards(raw)
        out_raw, out_proc, pos = [], [], 0
        for c in counts:
            out_raw.append(raw[pos : pos + c])
            out_proc.append(processed[pos : pos + c])
            pos += c
        return out_raw, out_proc

    def build_policy_pairs(
        self, items: Sequence[dict], params
    ) -> tuple[list[PreferencePair], dict]:
        """Sample ``preference_num_candidates`` aligned joint candidates per item, score them and
        keep the selected non-tied pairs. Returns the pairs and generation statistics."""
        a = self.args
        k = a.preference_num_candidates
        per_call = a.rollout_batch_size or 1
        pairs: list[PreferencePair] = []
        rewards_seen: list[float] = []
        tied_items = 0
        for start in range(0, len(items), per_call):
            chunk = list(items[start : start + per_call])
            samples = self.sample_candidates(chunk, k, params)
            texts = [[s.texts for s in samples[i]] for i in range(self.num_agents)]
            prompts = [samples[0][j].prompt for j in range(len(chunk))]
            raw, processed = self.score_joint(texts, prompts, chunk)
            for j in range(len(chunk)):
                rewards = processed[j]
                rewards_seen.extend(rewards)
                chosen = select_pairs(
                    candidate_pairs(rewards),
                    a.pair_selection,
                    a.preference_pairs_per_sample,
                    self.pair_rng,
                )
                if not chosen:
                    tied_items += 1
                mean = float(np.mean(rewards))
                for w, lo, _gap in chosen:
                    pairs.append(
                        PreferencePair(
                            prompts=[samples[i][j].prompt for i in range(self.num_agents)],
                            winner_completions=[texts[i][j][w] for i in range(self.num_agents)],
                            loser_completions=[texts[i][j][lo] for i in range(self.num_agents)],
                            prompt_ids=[
                                list(samples[i][j].prompt_ids) for i in range(self.num_agents)
                            ],
                            winner_ids=[
                                list(samples[i][j].completion_ids[w])
                                for i in range(self.num_agents)
                            ],
                            loser_ids=[
                                list(samples[i][j].completion_ids[lo])
                                for i in range(self.num_agents)
                            ],
                            winner_reward=rewards[w],
                            loser_reward=rewards[lo],
                            candidate_reward_mean=mean,
                            raw_rewards=[raw[j][w], raw[j][lo]],
                        )
                    )
        stats = {
            "preference/num_pairs": float(len(pairs)),
            "preference/candidate_reward_mean": float(np.mean(rewards_seen))
            if rewards_seen
            else float("nan"),
            "preference/tied_items": float(tied_items),
        }
        if self.collaboration is not None:
            stats.update(self.collaboration.stats())
        return pairs, stats

    # ------------------------------------------------------------------ multi-process
    def rank_share(self, rows: Sequence[Any]) -> list[Any]:
        """This rank's contiguous share of ``rows`` (all of them in a single process)."""
        begin, end = shard_range(0, len(rows), self.dist)
        return list(rows[begin:end])

    def gather_pairs(
        self, pairs: list[PreferencePair], stats: dict[str, float], num_items: int
    ) -> tuple[list[PreferencePair], dict[str, float]]:
        """Every rank's pairs, in rank order (item order, as shards are contiguous), and the
        pair statistics over all of them; identical on every rank. ``num_items`` is how many
        items this rank sampled (it weights the means)."""
        if not self.dist.is_distributed:
            return pairs, stats
        parts = all_gather_objects((pairs, stats, num_items), self.dist)
        merged = [p for part, _, _ in parts for p in part]
        total_items = sum(n for _, _, n in parts)
        summed = ("preference/num_pairs", "preference/tied_items")
        out: dict[str, float] = {}
        for key in stats:
            values = [(s[key], n) for _, s, n in parts if n]
            if key in summed:
                out[key] = float(sum(v for v, _ in values))
            elif total_items and values:
                out[key] = float(sum(v * n for v, n in values) / total_items)
            else:
                out[key] = float("nan")
        return merged, out

    def attach_reference_logps_sharded(self, pairs: Sequence[PreferencePair]) -> None:
        """:meth:`attach_reference_logps` for pairs every rank holds: each rank scores its
        share and the values are gathered (a single process scores them all)."""
        if not self.dist.is_distributed:
            self.attach_reference_logps(pairs)
            return
        mine = self.rank_share(pairs)
        self.attach_reference_logps(mine)
        parts = all_gather_objects([p.reference_logps for p in mine], self.dist)
        for pair, logps in zip(pairs, [v for part in parts for v in part]):
            pair.reference_logps = logps

    # ------------------------------------------------------------------ log-probs
    def sequence_logps(
        self, actor: int, prompt_ids, completion_ids, model=None, *, grad: bool
    ) -> torch.Tensor:
        """Summed token log-probs (EOS included, pads never) of completions under ``model``
        (default: the actor itself), in forwards of at most ``logprob_max_tokens`` tokens.

        Each distinct ``(prompt, completion)`` row is scored once (a candidate in several pairs
        gets one reference log-prob), rows packed or grouped by length
        (:func:`~comlrl.pbrl.pair_batches.row_logps`)."""
        model = self.agents[actor] if model is None else model
        index: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
        owner = [
            index.setdefault((tuple(p), tuple(c)), len(index))
            for p, c in zip(prompt_ids, completion_ids)
        ]
        with torch.enable_grad() if grad else torch.no_grad():
            values = row_logps(
                model,
                [list(p) for p, _ in index],
                [list(c) for _, c in index],
                self.tokenizers[actor].pad_token_id,
                self.args.logprob_max_tokens,
            )
            return values[owner]

    def attach_reference_logps(self, pairs: Sequence[PreferencePair]) -> None:
        """Cache reference log-probs of every pair's winner and loser, per actor.

        The reference is ``reference_model_name`` when set (loaded, used, freed), else the
        actors as they are now (before the coming updates).
        """
        if not pairs:
            return
        a = self.args
        refs = None
        if a.reference_model_name is not None:
            devices = (
                plan_devices("mp", a.reference_devices, self.num_agents, "reference_devices")
                if a.reference_devices is not None
                else self.agent_devices
            )
            loaded = freeze_model(load_causal_lm(a.reference_model_name, self.model_config))
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
                    values = self.sequence_logps(i, prompts, comps, model, grad=False).tolist()
                finally:
                    model.train(was_training)
                n = len(pairs)
                for j, pair in enumerate(pairs):
                    if i == 0:
                        pair.reference_logps = []
                    pair.reference_logps.append([values[j], values[n + j]])
        finally:
            del refs

    # ------------------------------------------------------------------ timing
    def take_timings(self) -> dict[str, float]:
        """``timing/generate``, ``timing/reward``, ``timing/update`` (seconds) and
        ``throughput/tokens_per_s`` since the previous training record; resets them."""
        # Every preference training record carries the same keys: 0.0 when nothing was timed.
        return self.timing.drain(idle_throughput=True)

    def run_config(self) -> dict[str, Any]:
        cfg = super().run_config()
        if self.collaboration is not None:
            cfg.update(num_roles=self.num_roles, num_actor_models=1)
        return cfg

    # ------------------------------------------------------------------ the contract
    def prepare(self, stage: int):
        """Build the stage's data (once: restored data is not sampled again) and its units; a
        stage that sampled data asks for a checkpoint right away."""
        sampled = False
        if self.prepared_stage != stage:
            sampled = self._prepare_stage(stage)
            self.prepared_stage = stage
        return units_of(self._stage_units(stage), "preference_data" if sampled else None)

    def run_unit(self, unit) -> None:
        """Run one unit of training (see :meth:`_run_unit`), counting the training ones."""
        self._run_unit(unit)
        if self._unit_trains(unit):
            self.units_done += 1

    def _run_unit(self, unit) -> None:
        """By default a unit is one collect/update round (a DPO update, say)."""
        loop.run_unit(self, unit)

    def eval_due(self, unit) -> bool:
        """Evaluate before every ``eval_interval``-th training unit."""
        every = self.args.eval_interval
        if not every or self.eval_dataset is None or self.args.eval_num_samples == 0:
            return False
        return self._unit_trains(unit) and self.units_done % every == 0

    def end_stage(self, stage: int) -> None:
        self._finish_stage(stage)

    def checkpoint_loop_limits(self) -> tuple[int, int | None]:
        """(stages, units of the current stage) for checkpoint cursor checks; the unit count is
        None until the stage's data exists."""
        units = self.stage_units
        return self.num_stages(), None if units is None else len(units)

    # ------------------------------------------------------------------ resumable state
    def state_dict(self) -> dict[str, Any]:
        rng = self.pair_rng.getstate()
        state = super().state_dict()
        state.update(
            kind=self.checkpoint_kind,
            units_done=self.units_done,
            prepared_stage=self.prepared_stage,
            pair_rng=[rng[0], list(rng[1]), rng[2]],
        )
        if self.collaboration is not None:
            state["parse_failures"] = self.collaboration.parse_failures
            state["parsed"] = self.collaboration.parsed
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != self.checkpoint_kind:
            raise ValueError(
                f"checkpoint holds a {state.get('kind')!r} run, not {self.checkpoint_kind!r}."
            )
        super().load_state_dict(state)
        self.units_done = int(state["units_done"])
        self.prepared_stage = state["prepared_stage"]
        rng = state["pair_rng"]
        self.pair_rng.setstate((rng[0], tuple(rng[1]), rng[2]))
        if self.collaboration is not None:
            self.collaboration.parse_failures = int(state.get("parse_failures", 0))
            self.collaboration.parsed = int(state.get("parsed", 0))

    def _warn_no_pairs(self) -> None:
        warnings.warn(
            f"{self.algorithm_name}: every item's candidates tied on reward, so there are no "
            "preference pairs to train on; sample more candidates or use a finer reward.",
            stacklevel=3,
        )
