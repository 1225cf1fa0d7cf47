"""The comparator of an iteration and the pairs it makes with the target policy.

Comparators are loaded, placed and opened per iteration (the current policy, a frozen copy, a
policy snapshot from history, another model, or an HTTP API, sampling per actor or as one
centralized writer); target and comparator candidates are scored and paired per item.
:class:`ComparatorPairing` is the iterative trainers' ``comparators`` collaborator.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from comlrl.core.centralized import CentralizedCollaboration
from comlrl.core.models import ensure_pad_token, freeze_model, is_model_name, load_causal_lm
from comlrl.core.placement.devices import plan_devices
from comlrl.pbrl.candidates import sample_candidates
from comlrl.pbrl.comparators import (
    ApiComparator,
    CentralizedComparator,
    Comparator,
    PolicyComparator,
    api_writer,
    local_writer,
    same_vocab,
)
from comlrl.pbrl.pairs import PreferencePair, select_pairs
from comlrl.pbrl.snapshots import history_snapshot, load_snapshot_agent, policy_dir

if TYPE_CHECKING:
    from comlrl.pbrl.base import PreferenceTrainerBase


class ComparatorPairing:
    """Comparator lifecycle and target-vs-comparator pairs of one iterative trainer.

    It keeps no trainer: the constructor and every method that samples, loads or pairs take
    the iterative trainer whose config, agents, tokenizers, devices, rollouts, timing and pair
    RNG they read.

    Args:
        trainer: the iterative trainer being built.
        api_client: the HTTP client of ``comparator_policy="api"`` (None otherwise).
        pair_scores: ``pair_scores(texts, actor_prompts, items)``: the raw task rewards (or
            None) and the scores pairs are ranked by, as ``[item][k]``, and with per-agent task
            rewards each agent's ``(raw, scores)`` (else None).

    Attributes:
        joint_builder: builds a centralized comparator's joint prompt.
        splitter: splits a centralized comparator's output per actor (None when the trainer is
            itself centralized and its collaboration splits).
        model_comparators: the frozen external comparators (``comparator_policy="model"``),
            ``{actor: (model, tokenizer, same_vocab)}``.
        calls: comparator generate calls so far (each gets its own seed).
    """

    def __init__(self, trainer: PreferenceTrainerBase, api_client: Any, pair_scores):
        t = trainer
        a = t.args
        self.api_client = api_client
        self.pair_scores = pair_scores
        seed = a.seed if a.seed is not None else 0
        self.seed = seed * 1_000_003 + 7919
        self.calls = 0
        if t.collaboration is not None:
            self.joint_builder = t.collaboration
            self.splitter = None
        else:
            self.joint_builder = CentralizedCollaboration(
                t.centralized_comparator_adapter, t.formatters, t.num_agents
            )
            self.splitter = self.joint_builder
        self.devices(t)  # a device list of the wrong length fails here, not later
        self.model_comparators = None
        if a.comparator_policy == "model":
            self.model_comparators = self._load_model_comparators(t)

    def devices(self, t: PreferenceTrainerBase) -> list:
        """Where comparator models go, per actor (default: the agents' devices)."""
        a = t.args
        if a.comparator_devices is None:
            return list(t.agent_devices)
        return plan_devices("mp", a.comparator_devices, t.num_agents, "comparator_devices")

    def _writer_index(self, t: PreferenceTrainerBase) -> int:
        return 0 if t.collaboration is not None else t.args.comparator_centralized_agent_index

    def _needed_actors(self, t: PreferenceTrainerBase) -> list[int]:
        if t.args.comparator_generation_mode == "centralized":
            return [self._writer_index(t)]
        return list(range(t.num_agents))

    def _load_model_comparators(self, t: PreferenceTrainerBase) -> dict[int, tuple[Any, Any, bool]]:
        """Frozen external comparators, loaded once (``comparator_model_name`` or
        ``comparator_agents``), keyed by actor index."""
        from transformers import AutoTokenizer

        a = t.args
        entries = list(a.comparator_agents) if a.comparator_agents is not None else None
        devices = self.devices(t)
        loaded: dict[str, Any] = {}
        toks: dict[str, Any] = {}
        out = {}
        for actor in self._needed_actors(t):
            if entries is None:
                source = a.comparator_model_name
            else:
                source = entries[actor] if len(entries) > 1 else entries[0]
            device = devices[actor]
            if is_model_name(source):
                key = f"{source}@{device}"
                if key not in loaded:
                    loaded[key] = freeze_model(load_causal_lm(str(source), t.model_config)).to(
                        device
                    )
                if str(source) not in toks:
                    tok = AutoTokenizer.from_pretrained(
                        str(source),
                        trust_remote_code=bool(t.model_config.get("trust_remote_code", False)),
                    )
                    ensure_pad_token(tok)
                    toks[str(source)] = tok
                model, tok = loaded[key], toks[str(source)]
            else:
                model, tok = freeze_model(source).to(device), t.tokenizers[actor]
            out[actor] = (model, tok, same_vocab(tok, t.tokenizers[actor]))
        return out

    # ------------------------------------------------------------------ comparators
    def open(self, t: PreferenceTrainerBase, iteration: int) -> Comparator:
        """The comparator of 1-based ``iteration`` (loads what it needs; ``close`` frees it)."""
        a = t.args
        policy = a.comparator_policy
        budget = a.generation_batch_size
        centralized = a.comparator_generation_mode == "centralized"
        if policy == "api":
            if centralized:
                return CentralizedComparator(
                    "api",
                    api_writer(self.api_client, self._writer_index(t)),
                    self.joint_builder.build_prompt,
                    t.num_agents,
                    self.splitter,
                )
            return ApiComparator(self.api_client)
        actors = self._needed_actors(t)
        models, toks, keeps = {}, {}, {}
        if policy == "current":
            for i in actors:
                models[i], toks[i], keeps[i] = t.agents[i], t.tokenizers[i], True
        elif policy == "current_copy":
            devices = self.devices(t)
            copies: dict[tuple[int, str], Any] = {}
            for i in actors:
                if str(devices[i]) == str(t.agent_devices[i]):
                    # Weights do not change while pairs are sampled: no copy needed.
                    models[i] = t.agents[i]
                else:
                    key = (id(t.agents[i]), str(devices[i]))
                    if key not in copies:
                        copies[key] = freeze_model(copy.deepcopy(t.agents[i])).to(devices[i])
                    models[i] = copies[key]
                toks[i], keeps[i] = t.tokenizers[i], True
        elif policy == "history":
            path = history_snapshot(policy_dir(t), iteration, a.comparator_history_k)
            devices = self.devices(t)
            for i in actors:
                models[i] = load_snapshot_agent(path, i, t.model_config, devices[i])
                toks[i], keeps[i] = t.tokenizers[i], True
        else:
            for i in actors:
                models[i], toks[i], keeps[i] = self.model_comparators[i]
        if centralized:
            w = self._writer_index(t)
            return CentralizedComparator(
                policy,
                local_writer(models[w], toks[w], budget, keeps[w] and self.splitter is None),
                self.joint_builder.build_prompt,
                t.num_agents,
                self.splitter,
            )
        order = list(range(t.num_agents))
        return PolicyComparator(
            policy,
            [models[i] for i in order],
            [toks[i] for i in order],
            [keeps[i] for i in order],
            owned=policy in ("current_copy", "history"),
            max_sequences_per_call=budget,
        )

    def _next_seed(self) -> int:
        self.calls += 1
        return self.seed + self.calls

    # ------------------------------------------------------------------ pairs
    def _text_ids(self, t: PreferenceTrainerBase, actor: int, text: str) -> list[int]:
        tok = t.tokenizers[actor]
        return list(tok(text, add_special_tokens=False)["input_ids"]) + [tok.eos_token_id]

    def iteration_pairs(
        self, t: PreferenceTrainerBase, items, comparator: Comparator, params, iteration: int
    ):
        """Target-vs-comparator pairs of ``items`` for 1-based ``iteration``, and the raw
        rewards seen per side (``{"target": [...], "comparator": [...]}``, for drift logs)."""
        a = t.args
        n_t = a.preference_num_candidates
        n_c = a.comparator_num_candidates or n_t
        per_call = a.rollout_batch_size or 1
        pairs: list[PreferencePair] = []
        seen = {"target": [], "comparator": []}
        for start in range(0, len(items), per_call):
            chunk = list(items[start : start + per_call])
            target = sample_candidates(t, chunk, n_t, params)
            actor_prompts = [[s.prompt for s in target[i]] for i in range(t.num_agents)]
            with t.timing.phase("generate"):
                comp = comparator.generate(chunk, actor_prompts, n_c, params, self._next_seed())
            # sampled comparator tokens count towards throughput/tokens_per_s (API text: none)
            t.timing.add_tokens(sum(len(ids) for per in comp for c in per for ids in c.ids or []))
            t_texts = [[s.texts for s in target[i]] for i in range(t.num_agents)]
            c_texts = [[c.texts for c in comp[i]] for i in range(t.num_agents)]
            t_raw, t_score, t_agents = self.pair_scores(t_texts, actor_prompts, chunk)
            c_raw, c_score, c_agents = self.pair_scores(c_texts, actor_prompts, chunk)
            # Per-agent task rewards pair target and comparator once per agent, by that agent's
            # own reward; each such pair trains only its agent (PreferencePair.agent).
            rankings = [(None, t_raw, c_raw, t_score, c_score)]
            if t_agents is not None and c_agents is not None:
                rankings = [
                    (i, tr, cr, ts, cs)
                    for i, ((tr, ts), (cr, cs)) in enumerate(zip(t_agents, c_agents))
                ]
            for j in range(len(chunk)):
                if t_raw is not None:
                    seen["target"].extend(t_raw[j])
                    seen["comparator"].extend(c_raw[j])
                for owner, tr, cr, ts, cs in rankings:
                    found = self._item_pairs(
                        t, j, target, comp, t_texts, c_texts, tr, cr, ts, cs, iteration
                    )
                    for pair in found:
                        pair.agent = owner
                    pairs.extend(found)
        return pairs, seen

    def _item_pairs(
        self,
        trainer: PreferenceTrainerBase,
        j,
        target,
        comp,
        t_texts,
        c_texts,
        t_raw,
        c_raw,
        t_score,
        c_score,
        it,
    ):
        a = trainer.args
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
            trainer.pair_rng,
            sort_key=lambda p: (p[3], p[2]),
        )
        mean = float(np.mean(list(ts) + list(cs)))
        out = []
        for t, c, _gap, _cr in chosen:
            target_wins = ts[t] > cs[c]
            t_ids, c_ids, prompts, prompt_ids = [], [], [], []
            for i in range(trainer.num_agents):
                t_ids.append(list(target[i][j].completion_ids[t]))
                ids = comp[i][j].ids
                c_ids.append(
                    list(ids[c])
                    if ids is not None
                    else self._text_ids(trainer, i, c_texts[i][j][c])
                )
                prompts.append(target[i][j].prompt)
                prompt_ids.append(list(target[i][j].prompt_ids))
            t_side = ([t_texts[i][j][t] for i in range(trainer.num_agents)], t_ids, ts[t])
            c_side = ([c_texts[i][j][c] for i in range(trainer.num_agents)], c_ids, cs[c])
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
