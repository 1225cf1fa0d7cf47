"""MARLHF: preference pairs → a joint reward model → multi-agent RL on the learned reward.

The RL phase is any registered algorithm (``rl_algorithm``: magrpo, mareinforce, maremax,
marloo from comlrl-reinforce; iac, maac from comlrl-ac), found through the algorithm registry,
so comlrl-pbrl depends on neither family. The RL trainer is built once, in ``__init__``, on the
same agent objects, and its training steps are driven from here: one logger, one monotonic
``env_step``, and one checkpoint that holds the reward model and the RL trainer's state.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import torch

from comlrl.core import loop
from comlrl.core.inputs import MAGRPO_STYLE, compat_constructor, signature_of
from comlrl.core.loop import units_of
from comlrl.core.models import ensure_pad_token, is_model_name
from comlrl.core.optim import build_adamw
from comlrl.core.precision import master_weights
from comlrl.pbrl import candidates
from comlrl.pbrl.base import PreferenceInputs, PreferenceTrainerBase
from comlrl.pbrl.config import MARLHFConfig
from comlrl.pbrl.pairs import PreferencePair
from comlrl.pbrl.reward_fit import fit_reward_model
from comlrl.pbrl.reward_model import (
    JointRewardModel,
)
from comlrl.pbrl.rl_phase import (
    RewardModelReward,
    mean_joint_scores,
    resolve_rl_algorithm,
    rl_config,
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
        rl_trainer: the RL trainer that updates the agents.
        preference_pairs: the pairs of phase (1).
    """

    algorithm_name = "MARLHF"
    default_config_cls = MARLHFConfig
    checkpoint_kind = "marlhf"

    inputs_cls = RLHFInputs
    run_config_keys = PreferenceTrainerBase.run_config_keys + ("rl_algorithm",)
    __init__ = compat_constructor(
        signature_of(
            MAGRPO_STYLE + ("metrics_callback", "critic_model", "critics"),
            keyword_only=("centralized_comparator_adapter", "model"),
        ),
        RLHFInputs,
    )

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
        self.rm_reward = RewardModelReward(self)
        self.rl_trainer = self._build_rl_trainer(metrics_callback, critics)

    def _new_reward_optimizer(self):
        params = [p for p in self.reward_model.parameters() if p.requires_grad]
        return build_adamw(params, lr=self.args.reward_learning_rate)

    def fit_reward_model(self, pairs) -> dict[str, float]:
        """Fit the reward model on ``pairs`` (see :func:`comlrl.pbrl.reward_fit.fit_reward_model`)."""
        return fit_reward_model(self, pairs)

    def reward_model_scores(self, prompts_per_actor, completions_per_actor) -> list[float]:
        """Scores of joint responses: ``prompts_per_actor[i][j]``, ``completions_per_actor[i][j]``
        (a reward model of per-agent rewards: the mean of the agents' scores)."""
        return mean_joint_scores(self, prompts_per_actor, completions_per_actor)

    def _rl_config(self):
        return rl_config(self.args, self.rl_trainer_cls.default_config_cls, self.num_agents)

    def _build_rl_trainer(self, metrics_callback, critics):
        cls = self.rl_trainer_cls
        fields = {f.name for f in dataclasses.fields(cls.inputs_cls)}
        values: dict[str, Any] = dict(
            agents=list(self.agents),
            num_agents=self.num_agents,
            tokenizer=list(self.tokenizers),
            model_config=self.model_config,
            train_dataset=self.train_dataset,
            reward_func=self.rm_reward,
            formatters=list(self.formatters),
            args=self._rl_config(),
        )
        extras = dict(metrics_callback=metrics_callback, critic_model=self._critic_source)
        extras["critics"] = critics
        for key, value in extras.items():
            if value is None:
                continue
            if key not in fields:
                if key == "metrics_callback":
                    continue  # a callback for actor-critic RL phases only
                raise ValueError(f"rl_algorithm={self.args.rl_algorithm!r} takes no {key}.")
            values[key] = value
        trainer = cls.from_inputs(cls.inputs_cls(**values))
        trainer.verbose = False
        return trainer

    # ------------------------------------------------------------------ the RL phase
    def rl_units(self) -> list[tuple[str, int]]:
        """One unit per global rollout batch of the dataset, then the end-of-epoch drain. Under
        several processes a global batch is every rank's batch together, and the last
        ``len % world_size`` items are left out so the ranks get equal shares."""
        world = self.dist.world_size
        size = max(1, self.rl_trainer.items_per_batch()) * world
        total = len(self.get_train_dataloader())
        total -= total % world
        return [("batch", s) for s in range(0, total, size)] + [("end_epoch", total)]

    def run_rl_unit(self, unit: tuple[str, int]) -> None:
        """Run one RL batch (or the end-of-epoch drain) on the RL trainer, sharing this
        trainer's logger and ``env_step``."""
        kind, start = unit
        inner = self.rl_trainer
        inner.reporting.logger = self.reporting.ensure_logger()
        inner.env_step = self.env_step
        inner.epoch = self.epoch
        inner.generation_kwargs = self.generation_kwargs
        if self.rl_stopped:
            return
        try:
            if kind == "batch":
                data = self.get_train_dataloader()
                world = self.dist.world_size
                size = max(1, inner.items_per_batch()) * world
                count = min(size, len(data) - len(data) % world - start)
                inner.run_unit(loop.materialize(inner, loop.ItemBatch(start, count)))
                self.reporting.last_reward_mean = inner.reporting.last_reward_mean
            else:
                loop.finish_stage(inner, self.epoch)
                if self.args.reward_model_onpolicy_check:
                    self.reporting.log_record(self.rm_check.end_epoch(self.args.rl_stop_accuracy))
        finally:
            self.env_step = inner.env_step

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
            "rl_env_step": self.rl_trainer.env_step,
            "rm_check": self.rm_check.state_dict(),
        }

    def _load_rlhf_state(self, state: dict[str, Any]) -> None:
        self.reward_model_trained = bool(state["reward_model_trained"])
        self.reward_model_per_agent = bool(state.get("reward_model_per_agent", False))
        self.reward_model_metrics = dict(state["reward_model_metrics"])
        rng = state["rm_rng"]
        self.rm_rng.setstate((rng[0], tuple(rng[1]), rng[2]))
        self.rl_trainer.load_state_dict(state["rl"])
        self.rl_trainer.env_step = int(state["rl_env_step"])
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
            self.rl_units() if self.reward_model_trained else [],
            "preference_data" if sampled else None,
        )

    def run_unit(self, unit) -> None:
        """Run one RL unit (see :meth:`run_rl_unit`), counting the RL batches trained."""
        self.run_rl_unit(unit)
        if unit[0] == "batch" and not self.rl_stopped:
            self.units_done += 1

    def eval_due(self, unit) -> bool:
        """Evaluate before every ``eval_interval``-th RL batch (never once the RL phase
        stopped)."""
        return unit[0] == "batch" and not self.rl_stopped and super().eval_due(unit)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(self._rlhf_state())
        state["num_preference_pairs"] = self.num_preference_pairs
        state["pairs_sampled"] = self.pairs_sampled
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._load_rlhf_state(state)
        self.num_preference_pairs = int(state["num_preference_pairs"])
        self.pairs_sampled = bool(state["pairs_sampled"])
