"""MADPOIter and MARLHFIter: preference learning repeated online against a comparator policy.

Each iteration (a stage of the loop):

1. the current policy (the *target*) samples ``preference_num_candidates`` joint candidates per
   item and the comparator ``comparator_num_candidates``; both are scored by the task reward (or,
   in MARLHFIter with ``preference_scoring_reward="reward_model"``, by the previous reward model);
2. target-vs-comparator pairs with a reward gap are selected per item;
3. the iteration's pairs are registered with the replay store, which returns the training pairs
   (``preference_replay_mode``), and the reward distribution is logged when asked;
4. MADPOIter runs ``num_train_epochs`` DPO epochs on them; MARLHFIter trains the reward model on
   them and then runs ``num_train_epochs`` RL epochs;
5. a policy snapshot is saved when the history comparator (or ``policy_checkpoint_dir``) needs it.
"""

from __future__ import annotations

import copy
import functools
import os
from typing import Any

import numpy as np

from comlrl.core.centralized import CentralizedCollaboration
from comlrl.core.devices import plan_devices
from comlrl.core.distributed import (
    all_gather_objects,
    all_reduce_sum,
    barrier,
    broadcast_object,
)
from comlrl.core.models import ensure_pad_token, freeze_model, load_causal_lm
from comlrl.core.rewards.ranges import get_reward_range
from comlrl.pbrl import drift
from comlrl.pbrl.api import ApiClient, ApiSettings
from comlrl.pbrl.base import PreferenceTrainerBase
from comlrl.pbrl.comparators import (
    ApiComparator,
    CentralizedComparator,
    Comparator,
    PolicyComparator,
    api_writer,
    local_writer,
    same_vocab,
)
from comlrl.pbrl.iter_config import MADPOIterConfig, MARLHFIterConfig
from comlrl.pbrl.madpo import MADPOTrainer
from comlrl.pbrl.marlhf import MARLHFTrainer
from comlrl.pbrl.pairs import PreferencePair, select_pairs
from comlrl.pbrl.replay import ReplayStore
from comlrl.pbrl.snapshots import (
    INITIAL,
    history_snapshot,
    load_snapshot_agent,
    save_policy,
    snapshot_name,
)


def _is_name(value: Any) -> bool:
    return isinstance(value, (str, bytes)) or hasattr(value, "__fspath__")


class IterativeMixin:
    """The iteration loop shared by MADPOIter and MARLHFIter (see the module docstring)."""

    run_config_keys = PreferenceTrainerBase.run_config_keys + (
        "num_iterations",
        "comparator_policy",
        "comparator_generation_mode",
        "preference_replay_mode",
        "comparator_num_candidates",
    )

    # ------------------------------------------------------------------ construction
    def _validate_before_loading(self, args, *, agent_model, agents, num_agents) -> None:
        super()._validate_before_loading(
            args, agent_model=agent_model, agents=agents, num_agents=num_agents
        )
        if args.log_reward_distribution and self.task_reward_func is not None:
            if get_reward_range(self.task_reward_func) is None:
                raise ValueError(
                    "log_reward_distribution=True needs reward_func.reward_range; declare it with "
                    "comlrl.core.rewards.set_reward_range(reward_func, low, high)."
                )
        if args.collaboration_mode == "centralized":
            actors = 1
        elif agents is not None and agent_model is None:
            actors = len(agents)
        else:
            actors = num_agents if num_agents is not None else (args.num_agents or 2)
        entries = args.comparator_agents
        if entries is not None and len(entries) not in (1, actors):
            raise ValueError(
                f"comparator_agents has {len(entries)} entries; give 1 (shared) or one per actor "
                f"({actors})."
            )
        if (
            args.comparator_generation_mode == "centralized"
            and args.collaboration_mode != "centralized"
            and args.comparator_centralized_agent_index >= actors
        ):
            raise ValueError(
                f"comparator_centralized_agent_index must be < the number of agents ({actors})."
            )
        self.api_client = None
        if args.comparator_policy == "api":
            self.api_client = ApiClient(ApiSettings.from_config(args))

    def _init_iterative(self) -> None:
        a = self.args
        self.iteration_pairs: list[PreferencePair] = []
        self.comparator_calls = 0
        seed = a.seed if a.seed is not None else 0
        self.comparator_seed = seed * 1_000_003 + 7919
        self.snapshots_enabled = (
            a.comparator_policy == "history" or a.policy_checkpoint_dir is not None
        )
        self.replay = ReplayStore(
            a.preference_replay_mode,
            a.preference_replay_k,
            a.preference_replay_lambda,
            a.preference_replay_sample_size,
            directory="",
            seed=seed,
            always_write=a.preference_replay_dir is not None,
        )
        # The joint prompt of a centralized comparator, and how its output is split per actor.
        if self.collaboration is not None:
            self._joint_builder = self.collaboration
            self._splitter = None
        else:
            self._joint_builder = CentralizedCollaboration(
                self.centralized_comparator_adapter, self.formatters, self.num_agents
            )
            self._splitter = self._joint_builder
        self._comparator_devices()  # a device list of the wrong length fails here, not later
        self._model_comparators = None
        if a.comparator_policy == "model":
            self._model_comparators = self._load_model_comparators()
        self.reward_histogram = None
        if a.log_reward_distribution:
            low, high = self.reward_range
            self.reward_histogram = drift.RewardHistogram(low, high)

    def _comparator_devices(self) -> list:
        a = self.args
        if a.comparator_devices is None:
            return list(self.agent_devices)
        return plan_devices("mp", a.comparator_devices, self.num_agents, "comparator_devices")

    def _writer_index(self) -> int:
        a = self.args
        return 0 if self.collaboration is not None else a.comparator_centralized_agent_index

    def _needed_actors(self) -> list[int]:
        if self.args.comparator_generation_mode == "centralized":
            return [self._writer_index()]
        return list(range(self.num_agents))

    def _load_model_comparators(self) -> dict[int, tuple[Any, Any, bool]]:
        """Frozen external comparators, loaded once (``comparator_model_name`` or
        ``comparator_agents``), keyed by actor index."""
        from transformers import AutoTokenizer

        a = self.args
        entries = list(a.comparator_agents) if a.comparator_agents is not None else None
        devices = self._comparator_devices()
        loaded: dict[str, Any] = {}
        toks: dict[str, Any] = {}
        out = {}
        for actor in self._needed_actors():
            if entries is None:
                source = a.comparator_model_name
            else:
                source = entries[actor] if len(entries) > 1 else entries[0]
            device = devices[actor]
            if _is_name(source):
                key = f"{source}@{device}"
                if key not in loaded:
                    loaded[key] = freeze_model(load_causal_lm(str(source), self.model_config)).to(
                        device
                    )
                if str(source) not in toks:
                    tok = AutoTokenizer.from_pretrained(
                        str(source),
                        trust_remote_code=bool(self.model_config.get("trust_remote_code", False)),
                    )
                    ensure_pad_token(tok)
                    toks[str(source)] = tok
                model, tok = loaded[key], toks[str(source)]
            else:
                model, tok = freeze_model(source).to(device), self.tokenizers[actor]
            out[actor] = (model, tok, same_vocab(tok, self.tokenizers[actor]))
        return out

    # ------------------------------------------------------------------ directories
    def _output_dir(self, configured: str | None, sub: str) -> str:
        if configured:
            return os.path.abspath(os.path.expanduser(configured))
        self._ensure_logger()
        return os.path.abspath(os.path.join(self.run_dir, sub))

    @property
    def policy_dir(self) -> str:
        """Where policy snapshots go."""
        return self._output_dir(self.args.policy_checkpoint_dir, "policy_checkpoints")

    @property
    def reward_distribution_dir(self) -> str:
        """Where the reward-distribution JSON and SVG files go."""
        return self._output_dir(None, "reward_distributions")

    # ------------------------------------------------------------------ comparators
    def _open_comparator(self, iteration: int) -> Comparator:
        """The comparator of 1-based ``iteration`` (loads what it needs; ``close`` frees it)."""
        a = self.args
        policy = a.comparator_policy
        budget = a.generation_batch_size
        centralized = a.comparator_generation_mode == "centralized"
        if policy == "api":
            if centralized:
                return CentralizedComparator(
                    "api",
                    api_writer(self.api_client, self._writer_index()),
                    self._joint_builder.build_prompt,
                    self.num_agents,
                    self._splitter,
                )
            return ApiComparator(self.api_client)
        actors = self._needed_actors()
        models, toks, keeps = {}, {}, {}
        if policy == "current":
            for i in actors:
                models[i], toks[i], keeps[i] = self.agents[i], self.tokenizers[i], True
        elif policy == "current_copy":
            devices = self._comparator_devices()
            copies: dict[tuple[int, str], Any] = {}
            for i in actors:
                if str(devices[i]) == str(self.agent_devices[i]):
                    # Weights do not change while pairs are sampled: no copy needed.
                    models[i] = self.agents[i]
                else:
                    key = (id(self.agents[i]), str(devices[i]))
                    if key not in copies:
                        copies[key] = freeze_model(copy.deepcopy(self.agents[i])).to(devices[i])
                    models[i] = copies[key]
                toks[i], keeps[i] = self.tokenizers[i], True
        elif policy == "history":
            path = history_snapshot(self.policy_dir, iteration, a.comparator_history_k)
            devices = self._comparator_devices()
            for i in actors:
                models[i] = load_snapshot_agent(path, i, self.model_config, devices[i])
                toks[i], keeps[i] = self.tokenizers[i], True
        else:
            for i in actors:
                models[i], toks[i], keeps[i] = self._model_comparators[i]
        if centralized:
            w = self._writer_index()
            return CentralizedComparator(
                policy,
                local_writer(models[w], toks[w], budget, keeps[w] and self._splitter is None),
                self._joint_builder.build_prompt,
                self.num_agents,
                self._splitter,
            )
        order = list(range(self.num_agents))
        return PolicyComparator(
            policy,
            [models[i] for i in order],
            [toks[i] for i in order],
            [keeps[i] for i in order],
            owned=policy in ("current_copy", "history"),
            max_sequences_per_call=budget,
        )

    def _next_comparator_seed(self) -> int:
        self.comparator_calls += 1
        return self.comparator_seed + self.comparator_calls

    # ------------------------------------------------------------------ pairs
    def _text_ids(self, actor: int, text: str) -> list[int]:
        tok = self.tokenizers[actor]
        return list(tok(text, add_special_tokens=False)["input_ids"]) + [tok.eos_token_id]

    def _pair_scores(self, texts, actor_prompts, items):
        """Raw task rewards (or None) and the scores pairs are ranked by, as ``[item][k]``."""
        return self.score_joint(texts, actor_prompts[0], items)

    def _iteration_pairs(self, items, comparator: Comparator, params, iteration: int):
        a = self.args
        n_t = a.preference_num_candidates
        n_c = a.comparator_num_candidates or n_t
        per_call = a.rollout_batch_size or 1
        pairs: list[PreferencePair] = []
        seen = {"target": [], "comparator": []}
        for start in range(0, len(items), per_call):
            chunk = list(items[start : start + per_call])
            target = self.sample_candidates(chunk, n_t, params)
            actor_prompts = [[s.prompt for s in target[i]] for i in range(self.num_agents)]
            with self.timed("generate"):
                comp = comparator.generate(
                    chunk, actor_prompts, n_c, params, self._next_comparator_seed()
                )
            # sampled comparator tokens count towards throughput/tokens_per_s (API text: none)
            self.timing.add_tokens(
                sum(len(ids) for per in comp for c in per for ids in c.ids or [])
            )
            t_texts = [[s.texts for s in target[i]] for i in range(self.num_agents)]
            c_texts = [[c.texts for c in comp[i]] for i in range(self.num_agents)]
            t_raw, t_score = self._pair_scores(t_texts, actor_prompts, chunk)
            c_raw, c_score = self._pair_scores(c_texts, actor_prompts, chunk)
            for j in range(len(chunk)):
                if t_raw is not None:
                    seen["target"].extend(t_raw[j])
                    seen["comparator"].extend(c_raw[j])
                pairs.extend(
                    self._item_pairs(
                        j, target, comp, t_texts, c_texts, t_raw, c_raw, t_score, c_score, iteration
                    )
                )
        return pairs, seen

    def _item_pairs(self, j, target, comp, t_texts, c_texts, t_raw, c_raw, t_score, c_score, it):
        a = self.args
        ts, cs = t_score[j], c_score[j]
        if a.comparator_pairing == "aligned":
            combos = [(k, k) for k in range(min(len(ts), len(cs)))]
        else:
            combos = [(t, c) for t in range(len(ts)) for c in range(len(cs))]
        candidates = [(t, c, abs(ts[t] - cs[c]), cs[c]) for t, c in combos if ts[t] != cs[c]]
        chosen = select_pairs(
            candidates,
            a.pair_selection,
            a.preference_pairs_per_sample,
            self.pair_rng,
            sort_key=lambda p: (p[3], p[2]),
        )
        mean = float(np.mean(list(ts) + list(cs)))
        out = []
        for t, c, _gap, _cr in chosen:
            target_wins = ts[t] > cs[c]
            t_ids, c_ids, prompts, prompt_ids = [], [], [], []
            for i in range(self.num_agents):
                t_ids.append(list(target[i][j].completion_ids[t]))
                ids = comp[i][j].ids
                c_ids.append(
                    list(ids[c]) if ids is not None else self._text_ids(i, c_texts[i][j][c])
                )
                prompts.append(target[i][j].prompt)
                prompt_ids.append(list(target[i][j].prompt_ids))
            t_side = ([t_texts[i][j][t] for i in range(self.num_agents)], t_ids, ts[t])
            c_side = ([c_texts[i][j][c] for i in range(self.num_agents)], c_ids, cs[c])
            win, lose = (t_side, c_side) if target_wins else (c_side, t_side)
            tr = t_raw[j][t] if t_raw is not None else None
            cr = c_raw[j][c] if c_raw is not None else None
            out.append(
                PreferencePair(
                    prompts=prompts,
                    winner_completions=win[0],
                    loser_completions=lose[0],
                    prompt_ids=prompt_ids,
                    winner_ids=win[1],
                    loser_ids=lose[1],
                    winner_reward=float(win[2]),
                    loser_reward=float(lose[2]),
                    candidate_reward_mean=mean,
                    raw_rewards=None if tr is None else ([tr, cr] if target_wins else [cr, tr]),
                    target_raw_reward=tr,
                    comparator_raw_reward=cr,
                    target_is_winner=target_wins,
                    iteration=it,
                )
            )
        return out

    # ------------------------------------------------------------------ the stage
    def num_stages(self) -> int:
        return self.args.num_iterations

    def stage_name(self) -> str:
        return "iteration"

    def _prepare_stage(self, stage: int) -> bool:
        a = self.args
        iteration = stage + 1
        if self.snapshots_enabled and stage == 0:
            # Written on every fresh start, so a reused output_dir never serves a stale policy.
            self._save_snapshot(INITIAL)
        if self.replay.writes and not self.replay.directory:
            self.replay.directory = self._output_dir(a.preference_replay_dir, "preference_replay")
        params = self.sampling_params(self.generation_kwargs)
        comparator = self._open_comparator(iteration)
        # Under several processes each rank samples its share of the items; every rank then
        # holds all the pairs (in item order) and selects the same training pairs.
        items = self.rank_share(list(self.get_train_dataloader()))
        try:
            pairs, seen = self._iteration_pairs(items, comparator, params, iteration)
        finally:
            comparator.close()
            del comparator
        pairs, seen = self._gather_iteration(pairs, seen)
        self._replay_add(iteration, pairs)
        selected = self.replay.select(pairs)
        self._log_iteration(iteration, pairs, selected, seen)
        if not selected:
            self._warn_no_pairs()
        self._train_on_selected(selected)
        return True

    # ------------------------------------------------------------------ several processes
    def _save_snapshot(self, name: str) -> None:
        """Rank 0 saves the policy snapshot; every rank waits until it is on disk."""
        if self.is_main_process:
            save_policy(self.policy_dir, name, self.agents, self.tokenizers)
        barrier(self.dist)

    def _gather_iteration(self, pairs, seen):
        """Every rank's pairs (rank order = item order), the rewards seen for the drift
        logger, and the comparator call count (so checkpoints agree across ranks)."""
        if not self.dist.is_distributed:
            return pairs, seen
        parts = all_gather_objects((pairs, seen, self.comparator_calls), self.dist)
        merged = [p for part, _, _ in parts for p in part]
        seen = {key: [r for _, s, _ in parts for r in s[key]] for key in seen}
        self.comparator_calls = max(calls for _, _, calls in parts)
        return merged, seen

    def _replay_add(self, iteration: int, pairs) -> None:
        """Register the iteration's pairs; rank 0 writes the replay shard and every rank reads
        its description (the shard files must be on a file system all ranks see)."""
        if not self.dist.is_distributed:
            self.replay.add(iteration, pairs)
            return
        if self.is_main_process:
            self.replay.add(iteration, pairs)
        state = broadcast_object(self.replay.state_dict(), self.dist)
        if not self.is_main_process:
            self.replay.load_state_dict(state)

    def _log_iteration(self, iteration, pairs, selected, seen) -> None:
        metrics = {
            "iter/current_iteration": float(iteration),
            "iter/current_preference_pairs": float(len(pairs)),
            "iter/total_preference_pairs": float(self.replay.total_pairs),
            "iter/train_preference_pairs": float(len(selected)),
        }
        # Counters of this rank's own calls: totals over ranks (the log averages over ranks).
        total = functools.partial(all_reduce_sum, ctx=self.dist)
        if self._splitter is not None or self.collaboration is not None:
            metrics["iter/comparator_parse_failures"] = total(self._joint_builder.parse_failures)
        if self.api_client is not None:
            metrics["iter/api_requests"] = total(self.api_client.requests_sent)
            metrics["iter/api_retries"] = total(self.api_client.retries)
        if self.reward_histogram is not None:
            chosen = {
                "target": [
                    p.target_raw_reward for p in selected if p.target_raw_reward is not None
                ],
                "comparator": [
                    p.comparator_raw_reward for p in selected if p.comparator_raw_reward is not None
                ],
            }
            record = drift.iteration_record(
                self.reward_histogram, iteration, seen, chosen, len(selected)
            )
            if self.is_main_process:
                drift.write_iteration(self.reward_distribution_dir, record)
            metrics.update(drift.summary_metrics(record))
            sink = self._ensure_logger().wandb
            if sink is not None:
                import wandb

                step = max(self.env_step, self.logger.last_step)
                sink.write(drift.wandb_plots(record, wandb.Html), step)
        self.log_record(metrics)

    def _finish_stage(self, stage: int) -> None:
        if self.snapshots_enabled:
            self._save_snapshot(snapshot_name(stage + 1))

    # ------------------------------------------------------------------ resumable state
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["iteration_pairs"] = [p.to_record() for p in self.iteration_pairs]
        state["comparator_calls"] = self.comparator_calls
        state["replay"] = self.replay.state_dict()
        state["replay_directory"] = self.replay.directory
        if self._splitter is not None:
            state["comparator_parse_failures"] = self._splitter.parse_failures
            state["comparator_parsed"] = self._splitter.parsed
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.iteration_pairs = [PreferencePair.from_record(r) for r in state["iteration_pairs"]]
        self.comparator_calls = int(state["comparator_calls"])
        self.replay.load_state_dict(state["replay"])
        self.replay.directory = state["replay_directory"]
        if self._splitter is not None:
            self._splitter.parse_failures = int(state.get("comparator_parse_failures", 0))
            self._splitter.parsed = int(state.get("comparator_parsed", 0))


class MADPOIterTrainer(IterativeMixin, MADPOTrainer):
    """Iterative (online) MADPO: every iteration samples target and comparator candidates,
    selects pairs (with replay), and runs ``num_train_epochs`` DPO epochs on them.

    With ``reference_free=False`` the reference of an iteration is the policy at its start (or
    ``reference_model_name``); reference log-probs are computed once per iteration.
    """

    algorithm_name = "MADPOIter"
    default_config_cls = MADPOIterConfig
    checkpoint_kind = "madpo_iter"

    def setup(self, inputs) -> None:
        """MADPO's set-up, then the comparators, replay and drift logging."""
        super().setup(inputs)
        self._init_iterative()

    def _train_on_selected(self, selected: list[PreferencePair]) -> None:
        if not self.args.reference_free:
            for pair in selected:
                pair.reference_logps = None
            self.attach_reference_logps_sharded(selected)
        self.iteration_pairs = list(selected)

    def _stage_units(self, stage: int):
        units = []
        for epoch in range(self.args.num_train_epochs):
            key = stage * 100_003 + epoch
            units += [("dpo", b) for b in self.dpo_units(self.iteration_pairs, key)]
        return units

    def collect(self, unit) -> list[PreferencePair]:
        """This rank's share of the unit's pairs of the current iteration."""
        return self.rank_share([self.iteration_pairs[i] for i in unit[1]])


class MARLHFIterTrainer(IterativeMixin, MARLHFTrainer):
    """Iterative (online) MARLHF: every iteration samples target and comparator candidates,
    selects pairs (with replay), trains the reward model on them (restarting from its initial
    weights unless ``reward_model_warm_start``), and runs ``num_train_epochs`` RL epochs.

    The RL trainer (its optimizers and any critics) persists across iterations.
    """

    algorithm_name = "MARLHFIter"
    default_config_cls = MARLHFIterConfig
    run_config_keys = IterativeMixin.run_config_keys + ("rl_algorithm",)
    checkpoint_kind = "marlhf_iter"

    def setup(self, inputs) -> None:
        """MARLHF's set-up, then the comparators, replay and drift logging."""
        super().setup(inputs)
        self._init_iterative()

    def _init_iterative(self) -> None:
        super()._init_iterative()
        self._rm_initial_state = None
        if not self.args.reward_model_warm_start:
            self._rm_initial_state = {
                k: v.detach().to("cpu", copy=True)
                for k, v in self.reward_model.state_dict().items()
            }

    def _pair_scores(self, texts, actor_prompts, items):
        a = self.args
        if a.preference_scoring_reward != "reward_model" or not self.reward_model_trained:
            return super()._pair_scores(texts, actor_prompts, items)
        raw = None
        if self.reward_histogram is not None:
            raw, _ = self.score_joint(texts, actor_prompts[0], items)
        scores = []
        for j in range(len(items)):
            k = len(texts[0][j])
            prompts = [[actor_prompts[i][j]] * k for i in range(self.num_agents)]
            comps = [list(texts[i][j]) for i in range(self.num_agents)]
            scores.append(self.reward_model_scores(prompts, comps))
        return raw, scores

    def _train_on_selected(self, selected: list[PreferencePair]) -> None:
        if self._rm_initial_state is not None:
            self.reward_model.load_state_dict(self._rm_initial_state)
            self.reward_optimizer = self._new_reward_optimizer()
        self.num_preference_pairs = len(selected)
        if selected:
            self.fit_reward_model(selected)

    def _stage_units(self, stage: int):
        if not self.num_preference_pairs or not self.reward_model_trained:
            return []
        units = []
        for _ in range(self.args.num_train_epochs):
            units += self.rl_units()
        return units


__all__ = ["IterativeMixin", "MADPOIterTrainer", "MARLHFIterTrainer"]
