"""Configuration of MADPO and MARLHF.

Field names and defaults follow CoMLRL 1.4.3 with these exceptions: ``num_agents`` defaults to
None (taken from the trainer and cross-checked), ``reward_model_device`` defaults to None (the
first agent's device, never a hard-coded "cuda:0"), and MARLHF's ``advantage_mode`` defaults to
None (derived from ``rl_algorithm``; an explicit, conflicting value raises instead of being
overwritten). MARLHF also holds out the pairs of 20 % of the items from reward-model training
(``reward_heldout_fraction``; 0 trains on every pair, as 1.4.3 did). Every field is validated
in ``__post_init__``; errors name the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from comlrl.core.config.base import POSITIVE, CommonConfig
from comlrl.core.config.fields import (
    Boolean,
    Choice,
    Custom,
    Integer,
    Noted,
    Number,
    Registered,
    Text,
    knob,
    retune,
)
from comlrl.core.config.knobs import (
    ADVANTAGE_MODE,
    CRITIC_DEVICES,
    CRITIC_LEARNING_RATE,
    CRITIC_TYPE,
    CRITIC_VALUE_HEAD_HIDDEN_DIM,
    JOINT_MODE,
    NUM_GENERATIONS,
    USE_SEPARATE_CRITIC,
    VALUE_CLIP_RANGE,
    VALUE_HEAD_HIDDEN_DIM,
    VALUE_LOSS_COEF,
)
from comlrl.core.distributed import MODES as DISTRIBUTED_MODES
from comlrl.core.placement.devices import validate_device_spec
from comlrl.core.rollout.tree import JOINT_MODE_ALIASES
from comlrl.pbrl.reward_model import POOLINGS
from comlrl.pbrl.rl_section import RLSection, fold_rl_section

COLLABORATION_MODES = ("decentralized", "centralized")
COLLABORATION_ALIASES = {
    "decentralised": "decentralized",
    "multi_agent": "decentralized",
    "multi-agent": "decentralized",
    "centralised": "centralized",
    "single_agent": "centralized",
    "single-agent": "centralized",
}
PAIR_SELECTIONS = ("reward_gap", "all", "random")
# comlrl-pbrl depends on no family, so it names the REINFORCE baselines itself.

# rl_algorithm -> the advantage baseline of that REINFORCE variant (None: actor-critic)
RL_ALGORITHMS: dict[str, str | None] = {
    "magrpo": "mean",
    "mareinforce": "raw",
    "maremax": "max",
    "marloo": "rloo",
    "iac": None,
    "maac": None,
}
RL_ALIASES = {"mareforce": "mareinforce"}

NAME = Text()


def _device(name: str, value: Any) -> str | None:
    if value is None:
        return None
    validate_device_spec(str(value), name)
    return str(value)


@dataclass
class MADPOConfig(CommonConfig):
    """Settings of MADPO: multi-agent DPO on preference pairs ranked by the task reward.

    The pair set is built once from the initial policy: every agent samples
    ``preference_num_candidates`` completions per item, joint candidates are aligned by index and
    scored with the task reward, and ordered pairs with a reward gap are selected
    (``pair_selection``, at most ``preference_pairs_per_sample`` per item). DPO then runs for
    ``num_train_epochs`` epochs over the pairs, ``train_batch_size`` pairs per update.

    ``reference_free=True`` (the CoMLRL behaviour) uses no reference policy. With
    ``reference_free=False`` the margins are measured against a reference: the initial agents, or
    ``reference_model_name`` when set; its log-probs are computed once per pair and cached.
    """

    num_turns: int = retune(1, check=Noted(Integer(1), "only 1 for now"))
    reference_kl_enabled: bool = retune(
        False,
        check=Noted(Boolean(), lambda cls: None if cls.accepts_reference_kl else "must be false"),
    )
    collaboration_mode: str = knob(
        "decentralized",
        help="`decentralized`: one model per agent; `centralized`: one model writes every role "
        "(an adapter builds its prompt and splits its completion).",
        check=Choice(COLLABORATION_MODES, COLLABORATION_ALIASES),
    )
    joint_mode: str = JOINT_MODE("aligned", check=Choice(("aligned",), JOINT_MODE_ALIASES))
    advantage_mode: str | None = ADVANTAGE_MODE(
        "mean", check=Registered("advantage", optional=True)
    )
    preference_loss: str = knob(
        "sigmoid",
        help="The registered preference loss (comlrl.core.algos.register_preference_loss): "
        "`sigmoid` is DPO's `-log sigmoid(beta * margin)` on the joint margin.",
        check=Registered("preference_loss"),
    )
    preference_num_candidates: int = knob(
        80,
        help="Completions K each agent samples per item; candidate k joins every agent's k-th.",
        check=Integer(2),
    )
    preference_pairs_per_sample: int | None = knob(
        16,
        help="Most preference pairs kept per item; None keeps every selected pair.",
        check=Integer(1, optional=True),
    )
    pair_selection: str = knob(
        "reward_gap",
        help="Which pairs come first: `reward_gap` largest gap first, `random` shuffled "
        "(seeded), `all` every non-tied pair (needs `preference_pairs_per_sample: null`).",
        check=Choice(lambda cls: cls.pair_selections),
    )
    dpo_beta: float = knob(
        0.1, help="DPO temperature β on the summed joint margin.", check=POSITIVE
    )
    dpo_nll_coef: float = knob(
        0.0,
        help="Weight α of a negative log-likelihood term on the winners added to the DPO loss "
        "(as in RPO): α × mean over pairs of the winners' NLL per token, all agents' tokens "
        "together. 0: plain DPO.",
        check=Number(0.0),
    )
    use_environment_step: bool = knob(
        True,
        help="Count env steps by trained pairs (`environment_steps_per_pair` each); False adds "
        "1 per update.",
        check=Boolean(),
    )
    environment_steps_per_pair: int = knob(
        2, help="How much the env step count grows per trained pair.", check=Integer(1)
    )
    # --- beyond the reference ---
    reference_free: bool = knob(
        True,
        help="True: no reference term in the DPO margins (CoMLRL's behaviour); False: margins "
        "against a reference policy.",
        check=Boolean(),
    )
    reference_model_name: str | None = knob(
        None,
        help="The reference policy when `reference_free=False`; None uses the initial agents.",
        check=NAME,
    )
    dpo_backward: str = knob(
        "auto",
        help="How the joint loss is backpropagated with several agents (the gradients are the "
        "same). `agentwise`: every agent is scored without gradients, then each agent's forward "
        "and backward run alone (one agent's activations alive at a time, one extra forward per "
        "agent); `joint`: every agent's graph is built, then one backward (peak memory grows "
        "with the agents); `auto`: `agentwise` when the joint graphs' estimated activations "
        "exceed one loss forward's budget (real-size models), else `joint`.",
        check=Choice(("auto", "agentwise", "joint")),
    )

    distributed_modes: ClassVar[tuple[str, ...]] = tuple(
        m for m in DISTRIBUTED_MODES if m != "fsdp"
    )
    # Which pair selections this config accepts (the iterative configs add one).
    pair_selections: ClassVar[tuple[str, ...]] = PAIR_SELECTIONS
    # MADPO has no reference-KL term; MARLHF passes it to its RL phase.
    accepts_reference_kl: ClassVar[bool] = False
    algorithm_label: ClassVar[str] = "MADPO"

    def _check_relations(self) -> None:
        super()._check_relations()
        label = self.algorithm_label
        if self.num_turns != 1:
            raise ValueError(
                f"num_turns: {label} currently supports num_turns=1 only, got {self.num_turns}."
            )
        if self.reference_kl_enabled and not self.accepts_reference_kl:
            raise ValueError(
                f"reference_kl_enabled: {label} has no reference-KL term (the reference package "
                "loaded reference models here and never used them); set reference_free=False "
                "for DPO margins against a reference policy."
            )
        if self.pair_selection == "all" and self.preference_pairs_per_sample is not None:
            raise ValueError(
                "preference_pairs_per_sample must be None when pair_selection='all' (every "
                "non-tied pair is kept); set it to None or pick another pair_selection."
            )
        if self.reference_model_name is not None and self.reference_free:
            raise ValueError(
                "reference_model_name is only used with reference_free=False; set "
                "reference_free=False or drop reference_model_name."
            )

    def _uses_reference(self) -> bool:
        return self.reference_kl_enabled or not self.reference_free

    @property
    def actor_count(self) -> int | None:
        """Models that are trained: one in centralized collaboration, else ``num_agents``."""
        return 1 if self.collaboration_mode == "centralized" else self.num_agents


@dataclass
class MARLHFConfig(MADPOConfig):
    """Settings of MARLHF: preference pairs → a joint reward model → multi-agent RL.

    The pairs are built as in MADPO. A :class:`~comlrl.pbrl.reward_model.JointRewardModel`
    (``reward_model_name``, default: the agents' model) is trained on them with a Bradley-Terry
    loss; then ``rl_algorithm`` (magrpo, mareinforce, maremax, marloo, iac or maac) trains the
    agents for ``num_train_epochs`` epochs with the reward model as the reward. Evaluation always
    uses the task reward.
    """

    advantage_mode: str | None = retune(
        None, check=Noted(Registered("advantage", optional=True), "None follows `rl_algorithm`")
    )
    rl_algorithm: str = knob(
        "magrpo",
        help="The RL method of the last phase, trained on the reward model's scores.",
        check=Choice(tuple(RL_ALGORITHMS), RL_ALIASES),
    )
    num_generations: int = NUM_GENERATIONS(
        4, check=Noted(Integer(1), "≥ 2 with a REINFORCE `rl_algorithm`")
    )
    policy_loss: str = knob(
        "reinforce",
        help="The RL phase's policy loss, a registered one (comlrl.core.algos."
        "register_policy_loss), handed to `rl_algorithm`'s config: `reinforce`, `ppo`, `gspo`, "
        "or a loss registered by name.",
        check=Registered("policy_loss"),
    )
    reward_model_name: str | None = knob(
        None, help="The reward model's backbone; None uses the agents' model.", check=NAME
    )
    reward_model_device: str | None = knob(
        None,
        help="Where the reward model lives; None puts it with the first agent.",
        check=Custom(_device, "None or a device"),
    )
    reward_learning_rate: float = knob(
        1.0e-5, help="AdamW learning rate of the reward model.", check=POSITIVE
    )
    reward_num_train_epochs: int = knob(
        1, help="Passes of reward-model training over the pairs.", check=Integer(1)
    )
    reward_train_batch_size: int = knob(1, help="Pairs per reward-model update.", check=Integer(1))
    reward_max_length: int | None = knob(
        None,
        help="Most tokens of a joint text the reward model reads (cut from the left, so the last "
        "agent's response stays); None: no cut.",
        check=Integer(1, optional=True),
    )
    reward_pooling: str = knob(
        "last",
        help="How the reward model reads a joint text: `last` the last real token's hidden "
        "state (CoMLRL's layout), `mean` the mean over every real token.",
        check=Choice(POOLINGS),
    )
    reward_freeze_backbone: bool = knob(
        False, help="Train only the reward model's linear head.", check=Boolean()
    )
    reward_heldout_fraction: float = knob(
        0.2,
        help="Share of the items whose pairs are kept out of reward-model training; the "
        "reward model is scored on them every epoch (`reward_model/heldout_accuracy`). 0: none.",
        check=Number(0.0, 1.0, max_inclusive=False),
    )
    reward_model_onpolicy_check: bool = knob(
        False,
        help="Also score the RL phase's samples with the task reward: logs, per RL epoch, how "
        "often the reward model orders two samples of an item as the task reward does "
        "(`reward_model/onpolicy_accuracy`) and their task reward.",
        check=Boolean(),
    )
    rl_stop_accuracy: float | None = knob(
        None,
        help="Stop the RL phase (MARLHFIter: that iteration's) after an RL epoch whose "
        "on-policy reward-model accuracy is below this; needs `reward_model_onpolicy_check`.",
        check=Number(0.0, 1.0, optional=True),
    )
    critic_model_name: str | None = knob(
        None,
        help="The critics' model for an actor-critic `rl_algorithm`; None uses the agents' model.",
        check=NAME,
    )
    critic_learning_rate: float | None = CRITIC_LEARNING_RATE(None)
    critic_devices: Any = CRITIC_DEVICES(None)
    use_separate_critic: bool = USE_SEPARATE_CRITIC(True)
    critic_type: str = CRITIC_TYPE("v")
    value_loss_coef: float = VALUE_LOSS_COEF(0.6)
    value_clip_range: float | None = VALUE_CLIP_RANGE(0.2)
    critic_value_head_hidden_dim: int | None = CRITIC_VALUE_HEAD_HIDDEN_DIM(None)
    value_head_hidden_dim: int | None = VALUE_HEAD_HIDDEN_DIM(None)
    rl: dict | None = knob(
        None,
        help="The RL phase's own settings: fields of `rl_algorithm`'s config (e.g. "
        "`{policy_loss: ppo, num_iterations: 2}`: PPO passes per batch), on top of the settings "
        "MARLHF shares with it. The flat `advantage_mode`, `num_generations`, `policy_loss`, "
        "critic and value fields are deprecated aliases of the same `rl` keys.",
        check=RLSection(),
    )

    accepts_reference_kl: ClassVar[bool] = True
    algorithm_label: ClassVar[str] = "MARLHF"

    def _check_relations(self) -> None:
        super()._check_relations()
        fold_rl_section(self)
        if self.rl_stop_accuracy is not None and not self.reward_model_onpolicy_check:
            raise ValueError(
                "rl_stop_accuracy needs reward_model_onpolicy_check=True (the stop reads the "
                "on-policy accuracy that check measures); set it or drop rl_stop_accuracy."
            )
        baseline = RL_ALGORITHMS[self.rl_algorithm]
        if baseline is None:
            if self.advantage_mode is not None:
                raise ValueError(
                    f"advantage_mode does not apply to rl_algorithm={self.rl_algorithm!r} "
                    "(an actor-critic method); leave it None."
                )
            return
        if self.num_generations < 2:
            raise ValueError(f"num_generations must be >= 2, got {self.num_generations!r}.")
        if self.advantage_mode is None:
            self.advantage_mode = baseline
        elif self.advantage_mode != baseline:
            raise ValueError(
                f"advantage_mode={self.advantage_mode!r} conflicts with "
                f"rl_algorithm={self.rl_algorithm!r}, whose baseline is {baseline!r}; leave "
                "advantage_mode None or pick the matching rl_algorithm."
            )

    @property
    def uses_actor_critic(self) -> bool:
        """True when the RL phase is IAC or MAAC."""
        return RL_ALGORITHMS[self.rl_algorithm] is None
