"""MARLHF: preference pairs → a joint reward model → multi-agent RL on the learned reward.

The RL phase is any registered algorithm (``rl_algorithm``: magrpo, mareinforce, maremax,
marloo from comlrl-reinforce; iac, maac from comlrl-ac), found through the algorithm registry,
so comlrl-pbrl depends on neither family. The RL algorithm is built once, in ``__init__``, on
the same agent objects; MARLHF's ``collect`` and ``update`` are its own, driven by the core
loop (:mod:`comlrl.pbrl.rl_phase`): one logger, one run state (a monotonic step count), and one checkpoint
that holds the reward model and the RL algorithm's state.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any

import torch

from comlrl.core import loop
from comlrl.core.callable_types import (
    DatasetArg,
    FormatterArg,
    Hook,
    ModelSource,
    RewardArg,
    RewardProcessor,
    TokenizerArg,
)
from comlrl.core.inputs import inputs_from
from comlrl.core.loop import EndOfPass, units_of
from comlrl.core.models import ensure_pad_token, is_model_name
from comlrl.core.training.optim import build_adamw
from comlrl.core.training.precision import master_weights
from comlrl.pbrl import candidates
from comlrl.pbrl.base import PreferenceInputs, PreferenceTrainerBase
from comlrl.pbrl.config import MARLHFConfig
from comlrl.pbrl.pairs import PreferencePair
from comlrl.pbrl.reward_fit import fit_reward_model
from comlrl.pbrl.reward_model import JointRewardModel
from comlrl.pbrl.rl_phase import (
    RL_OWNED_STATE_KEYS,
    RLBatch,
    build_rl_algorithm,
    mean_joint_scores,
    resolve_rl_algorithm,
    reward_model_reward,
    rl_units,
)
from comlrl.pbrl.rm_checks import OnPolicyCheck


@dataclasses.dataclass
class RLHFInputs(PreferenceInputs):
    """The preference inputs plus what an actor-critic RL phase takes."""

    metrics_callback: Any = None
    critic_model: Any = None
    critics: Any = None


class MARLHFTrainer(PreferenceTrainerBase):
    """Multi-agent RLHF (CoMLRL-compatible constructor and methods).

    Phases: (1) preference pairs from the initial policy, ranked by the task reward, as in
    MADPO; (2) a :class:`JointRewardModel` trained on them with a Bradley-Terry loss
    (``reward_model/loss``, ``reward_model/accuracy`` logged); (3) ``num_train_epochs`` epochs of
    ``rl_algorithm`` with the reward model as the reward. Evaluation uses the task reward.

    Extra arguments: ``metrics_callback`` (passed to actor-critic RL trainers), ``critic_model``
    and ``critics`` (critics for iac/maac).

    Attributes:
        reward_model: the joint reward model; ``reward_tokenizer`` its tokenizer.
        rl_trainer: the RL algorithm (a trainer of its family) that updates the agents.
        preference_pairs: the pairs of phase (1).
    """

    algorithm_name = "MARLHF"
    default_config_cls = MARLHFConfig
    checkpoint_kind = "marlhf"
    rl_trainer: Any = None

    @property
    def turn_metrics_over(self) -> str | None:
        """As the RL algorithm logs its updates (the RL phase's records are its records)."""
        return getattr(self.rl_trainer, "turn_metrics_over", None)

    inputs_cls = RLHFInputs
    run_config_keys = PreferenceTrainerBase.run_config_keys + ("rl_algorithm",)

    def __init__(
        self,
        agent_model: ModelSource | None = None,
        agents: Sequence[ModelSource] | None = None,
        num_agents: int | None = 2,
        tokenizer: TokenizerArg | None = None,
        model_config: dict | None = None,
        train_dataset: DatasetArg | None = None,
        eval_dataset: DatasetArg | None = None,
        dataset_type: str | None = None,
        reward_func: RewardArg | None = None,
        reward_processor: RewardProcessor | None = None,
        formatters: FormatterArg | None = None,
        external_transition: Hook | None = None,
        wandb_config: dict | None = None,
        eval_logger: Hook | None = None,
        eval_aggregator: Hook | None = None,
        args: MARLHFConfig | None = None,
        metrics_callback: Hook | None = None,
        critic_model: ModelSource | None = None,
        critics: Sequence[ModelSource] | None = None,
        *,
        centralized_comparator_adapter: Any = None,
        model: ModelSource | None = None,
    ) -> None:
        """Build the trainer from CoMLRL 1.4.3's arguments, in its order (see
        :class:`~comlrl.reinforce.MAGRPOTrainer`), plus what an actor-critic RL phase takes:
        ``metrics_callback`` and its critics (``critic_model`` or ``critics``)."""
        self.setup(inputs_from(RLHFInputs, locals()))

    def setup(self, inputs: RLHFInputs) -> None:
        """The preference base's set-up, then the reward model and the RL trainer."""
        self._rlhf_inputs = dict(critic_model=inputs.critic_model, critics=inputs.critics)
        super().setup(inputs)
        self._init_rlhf(metrics_callback=inputs.metrics_callback, critics=inputs.critics)
        self.preference_pairs: list[PreferencePair] | None = None
        self.num_preference_pairs = 0
        self.pairs_sampled = False

    def _validate_before_loading(self, args, *, agent_model, agents, num_agents) -> None:
        super()._validate_before_loading(
            args, agent_model=agent_model, agents=agents, num_agents=num_agents
        )
        self._validate_rlhf_inputs(
            args, agent_model=agent_model, agents=agents, **self._rlhf_inputs
        )

    # ------------------------------------------------------------------ reward model and RL phase

    def _validate_rlhf_inputs(self, args, *, agent_model, agents, critic_model, critics) -> None:
        """Everything that can fail before loading: the RL algorithm, model sources, devices."""
        if agent_model is None and not agents:
            raise ValueError("Either agent_model or agents must be provided.")
        self.rl_trainer_cls = resolve_rl_algorithm(args.rl_algorithm)
        if getattr(self.rl_trainer_cls, "default_config_cls", None) is None:
            raise ValueError(f"rl_algorithm={args.rl_algorithm!r} declares no default_config_cls.")
        first = agent_model if agent_model is not None else (agents[0] if agents else None)
        self._rm_source = args.reward_model_name if args.reward_model_name is not None else first
        if self._rm_source is None:
            raise ValueError("reward_model_name is required when no agent model is given.")
        self._critic_source = None
        if args.uses_actor_critic:
            needs_critic = args.rl_algorithm == "maac" or args.use_separate_critic
            source = critic_model if critic_model is not None else args.critic_model_name
            if source is None and is_model_name(first):
                source = first
            if needs_critic and source is None and not critics:
                raise ValueError(
                    f"rl_algorithm={args.rl_algorithm!r} needs a critic: pass critic_model or "
                    "critics, or set critic_model_name (agents given as objects leave no name "
                    "to load a critic from)."
                )
            self._critic_source = source if needs_critic else None

    def _init_rlhf(self, *, metrics_callback, critics) -> None:
        a = self.args
        device = (
            torch.device(a.reward_model_device)
            if a.reward_model_device is not None
            else self.agent_devices[0]
        )
        source = self._rm_source if is_model_name(self._rm_source) else self.agents[0]
        self.reward_model = JointRewardModel.from_source(
            source,
            self.model_config,
            freeze_backbone=a.reward_freeze_backbone,
            seed=a.seed if a.seed is not None else 0,
            pooling=a.reward_pooling,
        ).to(device)
        if a.bf16:
            master_weights(self.reward_model)
        self.reward_model.eval()
        if is_model_name(self._rm_source) and str(self._rm_source) != str(self.sources[0]):
            from transformers import AutoTokenizer

            self.reward_tokenizer = AutoTokenizer.from_pretrained(
                str(self._rm_source),
                trust_remote_code=bool(self.model_config.get("trust_remote_code", False)),
            )
            ensure_pad_token(self.reward_tokenizer)
        else:
            self.reward_tokenizer = self.tokenizers[0]
        self.reward_optimizer = self._new_reward_optimizer()
        self.rm_rng = random.Random(a.seed if a.seed is not None else 0)
        self.reward_model_trained = False
        self.reward_model_per_agent = False
        self.reward_model_metrics: dict[str, float] = {}
        self.rm_check = OnPolicyCheck()
        self.rl_trainer = build_rl_algorithm(
            self,
            self.rl_trainer_cls,
            metrics_callback=metrics_callback,
            critic_source=self._critic_source,
            critics=critics,
        )
        # The loop fills the RL algorithm's buffer: the same objects, so that the run has one
        # buffer, and checkpoints restore it through either trainer.
        rl = self.rl_trainer
        self.rollout_buffer, self.shuffle_rng = rl.rollout_buffer, getattr(rl, "shuffle_rng", None)
        self.sample_cls, self.joint_sample_cls = rl.sample_cls, rl.joint_sample_cls

    def _new_reward_optimizer(self):
        params = [p for p in self.reward_model.parameters() if p.requires_grad]
        return build_adamw(params, lr=self.args.reward_learning_rate)

    def fit_reward_model(self, pairs) -> dict[str, float]:
        """Fit the reward model on ``pairs`` (see :func:`comlrl.pbrl.reward_fit.fit_reward_model`)."""
        return fit_reward_model(self, pairs)

    def rm_reward(self, *agent_completions, prompts=None, batch_items=None) -> list:
        """The RL phase's reward function: the reward model's scores of the joint responses
        (see :func:`comlrl.pbrl.rl_phase.reward_model_reward`)."""
        return reward_model_reward(self, agent_completions, prompts, batch_items)

    def reward_model_scores(self, prompts_per_actor, completions_per_actor) -> list[float]:
        """Scores of joint responses: ``prompts_per_actor[i][j]``, ``completions_per_actor[i][j]``
        (a reward model of per-agent rewards: the mean of the agents' scores)."""
        return mean_joint_scores(self, prompts_per_actor, completions_per_actor)

    @property
    def rl_stopped(self) -> bool:
        """Whether ``rl_stop_accuracy`` ended this RL phase early."""
        return self.rm_check.stopped

    # ------------------------------------------------------------------ resumable state
    def trainable_models(self) -> dict[str, Any]:
        models = dict(self.rl_trainer.trainable_models())
        models["reward_model"] = self.reward_model
        return models

    def checkpoint_tokenizers(self) -> dict[str, Any]:
        tokenizers = dict(self.rl_trainer.checkpoint_tokenizers())
        tokenizers["reward_model"] = self.reward_tokenizer
        return tokenizers

    def optimizers_list(self) -> list:
        return list(self.rl_trainer.optimizers_list()) + [self.reward_optimizer]

    def _rlhf_state(self) -> dict[str, Any]:
        rng = self.rm_rng.getstate()
        return {
            "reward_model_trained": self.reward_model_trained,
            "reward_model_per_agent": self.reward_model_per_agent,
            "reward_model_metrics": dict(self.reward_model_metrics),
            "rm_rng": [rng[0], list(rng[1]), rng[2]],
            "rl": self.rl_trainer.state_dict(),
            "rm_check": self.rm_check.state_dict(),
        }

    def _load_rlhf_state(self, state: dict[str, Any]) -> None:
        self.reward_model_trained = bool(state["reward_model_trained"])
        self.reward_model_per_agent = bool(state.get("reward_model_per_agent", False))
        self.reward_model_metrics = dict(state["reward_model_metrics"])
        rng = state["rm_rng"]
        self.rm_rng.setstate((rng[0], tuple(rng[1]), rng[2]))
        self.rl_trainer.load_state_dict(state["rl"])
        if "rm_check" in state:
            self.rm_check.load_state_dict(state["rm_check"])

    # ------------------------------------------------------------------ the contract
    def prepare(self, stage: int):
        """Sample the preference pairs and fit the reward model once, at the first stage (a
        restored run has them, and asks for no checkpoint), then the stage's RL epoch."""
        sampled = self.prepared_stage != stage and not self.pairs_sampled
        if sampled:
            # Each rank samples its share of the items; every rank then holds all the pairs.
            pairs, stats, num_items = candidates.sample_policy_pairs(self)
            pairs, stats = candidates.gather_pairs(pairs, stats, num_items, self.dist)
            self.reporting.log_record(stats)
            self.preference_pairs = pairs
            self.num_preference_pairs = len(pairs)
            self.pairs_sampled = True
            if pairs:
                self.fit_reward_model(pairs)
            else:
                self.warn_no_pairs()
        self.prepared_stage = stage
        return units_of(
            rl_units(self) if self.reward_model_trained else [],
            "preference_data" if sampled else None,
        )

    def collect(self, unit):
        """An RL batch: the RL algorithm's experience of this rank's share of its items; the
        end of an RL epoch (after the loop used the buffer's remainder): the RL algorithm's
        end-of-stage work and the on-policy check's epoch metrics. Nothing once
        ``rl_stop_accuracy`` stopped the RL phase."""
        if self.rl_stopped:
            return None
        if isinstance(unit, EndOfPass):
            self.rl_trainer.end_stage(self.run_state.epoch)
            if self.args.reward_model_onpolicy_check:
                self.reporting.log_record(self.rm_check.end_epoch(self.args.rl_stop_accuracy))
            return None
        self.units_done += 1
        items = loop.materialize(self, loop.ItemBatch(unit.start, unit.count))
        self.rl_trainer.generation_kwargs = self.generation_kwargs
        return self.rl_trainer.collect(items)

    def update(self, experience) -> dict[str, float] | None:
        """The RL algorithm's update on the buffer's experience."""
        return self.rl_trainer.update(experience)

    def eval_due(self, unit) -> bool:
        """Evaluate before every ``eval_interval``-th RL batch (never once the RL phase
        stopped)."""
        return isinstance(unit, RLBatch) and not self.rl_stopped and super().eval_due(unit)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        for key in RL_OWNED_STATE_KEYS:
            state.pop(key, None)
        state.update(self._rlhf_state())
        state["num_preference_pairs"] = self.num_preference_pairs
        state["pairs_sampled"] = self.pairs_sampled
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # The core's loader restores the RL algorithm's buffer through this trainer (the same
        # objects), so it reads the keys the RL state holds; the RL state is restored after.
        owned = {k: state["rl"][k] for k in RL_OWNED_STATE_KEYS if k in state["rl"]}
        super().load_state_dict({**state, **owned})
        self._load_rlhf_state(state)
        self.num_preference_pairs = int(state["num_preference_pairs"])
        self.pairs_sampled = bool(state["pairs_sampled"])
