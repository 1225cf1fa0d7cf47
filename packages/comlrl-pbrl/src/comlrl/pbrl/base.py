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
import random
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from comlrl.core import loop
from comlrl.core.centralized import (
    CentralizedCollaboration,
    TaggedCentralizedComparatorAdapter,
    centralize,
    check_adapter,
)
from comlrl.core.devices import plan_devices
from comlrl.core.distributed import resolve_mode
from comlrl.core.input_checks import check_agent_count
from comlrl.core.inputs import MAGRPO_STYLE, TrainerInputs, compat_constructor, signature_of
from comlrl.core.logprobs import score
from comlrl.core.loop import units_of
from comlrl.core.models import freeze_model, load_causal_lm
from comlrl.core.rewards import RewardCaller
from comlrl.core.trainer import TrainerBase
from comlrl.pbrl.candidates import CandidatePairs
from comlrl.pbrl.config import MADPOConfig
from comlrl.pbrl.pairs import PreferencePair


@dataclass
class PreferenceInputs(TrainerInputs):
    """The trainer inputs plus the adapter of centralized collaboration."""

    centralized_comparator_adapter: Any = None


class PreferenceTrainerBase(CandidatePairs, TrainerBase):
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
        self.reward_caller = RewardCaller(
            self.reward_func,
            num_agents=self.num_agents,
            reward_processor=self.reward_processor,
            call_mode=args.reward_call_mode,
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

    def _unit_trains(self, unit: Any) -> bool:
        """Whether ``unit`` is a training step (eval cadence counts those)."""
        return True

    def _finish_stage(self, stage: int) -> None:
        """Hook after the last unit of a stage."""

    # ------------------------------------------------------------------ log-probs
    def sequence_logps(
        self, actor: int, prompt_ids, completion_ids, model=None, *, grad: bool
    ) -> torch.Tensor:
        """Summed token log-probs (EOS included, pads never) of completions under ``model``
        (default: the actor itself), in forwards of at most ``logprob_max_tokens`` tokens.

        Each distinct ``(prompt, completion)`` row is scored once (a candidate in several pairs
        gets one reference log-prob), rows packed or grouped by length
        (:func:`comlrl.core.logprobs.score`, ``layout="packed"``). DPO scores at temperature 1
        whatever the candidates were sampled at: its loss has no importance ratio over the
        samples, and its optimum is stated for the model's own distribution."""
        model = self.agents[actor] if model is None else model
        return score(
            model,
            prompt_ids,
            completion_ids,
            pad_id=self.tokenizers[actor].pad_token_id,
            max_tokens=self.args.logprob_max_tokens,
            grad=grad,
            layout="packed",
        ).sequence_sum()

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
        if not every or not self.can_evaluate():
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
