"""Configuration of the REINFORCE family (MAGRPO and its variants)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from comlrl.core import algos
from comlrl.core.compat.notices import note_discount_applies
from comlrl.core.config.base import CommonConfig
from comlrl.core.config.fields import (
    Boolean,
    Choice,
    Custom,
    Integer,
    Number,
    Registered,
    knob,
)
from comlrl.core.config.knobs import (
    ADVANTAGE_MODE,
    CLIP_RATIO_C,
    JOINT_MODE,
    NUM_GENERATIONS,
    TRL_LOSS_TYPES,
)
from comlrl.reinforce.presets import PRESET_ALIASES, PRESETS, refuse_inert

NORMALIZATION_SCOPES = ("group", "batch")
LOSS_AGGREGATIONS = ("sum", "sequence_mean", "token_mean", "constant")
# Other spellings of the same choices: `none`, and TRL GRPOTrainer's `loss_type` names.
LOSS_AGGREGATION_SPELLINGS = {"none": "sum", **TRL_LOSS_TYPES}
# GSPO's clip range from its paper (the sequence ratio is a per-token geometric mean, so it
# moves far less than a token ratio); used when neither epsilon nor epsilon_high is given.
GSPO_EPSILON, GSPO_EPSILON_HIGH = 3e-4, 4e-4
PPO_EPSILON = 0.2


def _check_weight_list(name: str, value):
    if value is None:
        return None
    ok = isinstance(value, (list, tuple)) and value
    if ok:
        ok = all(
            not isinstance(w, bool) and isinstance(w, (int, float)) and math.isfinite(w)
            for w in value
        )
    if not ok:
        raise ValueError(
            f"{name} must be None or a non-empty list of finite numbers, got {value!r}."
        )
    return [float(w) for w in value]


def check_kl_placement(config: Any) -> None:
    """Refuse a KL in both the reward and the loss, and a KL estimator that does nothing where it
    is used; each ValueError names the field."""
    if config.reference_kl_enabled and config.beta > 0:
        raise ValueError(
            f"beta={config.beta} puts a KL term in the loss while reference_kl_enabled=True puts "
            "one in the reward; choose one (beta=0 for KL in the reward, or "
            "reference_kl_enabled=False for KL in the loss)."
        )
    if config.beta > 0 and config.reference_kl_estimator == "k1":
        raise ValueError(
            "reference_kl_estimator='k1' with beta > 0: k1 in the loss has zero expected "
            "gradient, so the KL term would do nothing; use k2 or k3 (or None, which is k3) in "
            "the loss, or k1 in the reward (reference_kl_enabled=True, beta=0)."
        )


@dataclass
class MAGRPOConfig(CommonConfig):
    """Settings of MAGRPO (multi-agent GRPO) and its REINFORCE variants.

    Field names and defaults follow CoMLRL 1.4.3, except ``early_termination_threshold`` (None:
    multi-turn trees grow to ``num_turns``) and ``num_agents`` (None: taken from the trainer).
    Every field is validated on construction; docs/reference/config_reinforce.md lists them.
    """

    num_generations: int = NUM_GENERATIONS(4, check=Integer(2))
    joint_mode: str = JOINT_MODE("aligned")
    # Choices of registered math come from the registry (built-in and third-party functions).
    advantage_mode: str = ADVANTAGE_MODE("mean", check=Registered("advantage"))
    policy_loss: str = knob(
        "reinforce",
        help="The registered policy loss (comlrl.core.algos.register_policy_loss): `reinforce` "
        "weights each completion's log-probability by its advantage; `ppo` clips a per-token "
        "ratio to the rollout policy, `gspo` a per-completion (sequence-level) ratio.",
        check=Registered("policy_loss"),
    )
    advantage_normalization_scope: str = knob(
        "group",
        help="Where advantages are z-scored: within each `group` of K siblings, or over each "
        "optimizer step's mini-batch `batch` (REINFORCE++'s batch normalization; a mini-batch "
        "holds `train_batch_size` nodes of one turn, so the moments are that mini-batch's, "
        "pooled over ranks, and with `num_iterations` > 1 each pass's reshuffle regroups them).",
        check=Choice(NORMALIZATION_SCOPES),
    )
    loss_aggregation: str = knob(
        "sum",
        help="How token log-probs make the mini-batch loss: `sum` sums each completion's tokens "
        "(1.4.3), `sequence_mean` averages them per completion (GRPO), `token_mean` averages "
        "over every token of the mini-batch (DAPO), `constant` divides each sum by "
        "`max_new_tokens` (Dr. GRPO). Completions are weighted 1/(K·groups) except in "
        "`token_mean`. TRL's `loss_type` names are accepted as values: `grpo` = "
        "`sequence_mean`, `bnpo` and `dapo` = `token_mean`, `dr_grpo` = `constant`; `none` = "
        "`sum`. `policy_loss='gspo'` always uses `sequence_mean` (other values raise).",
        check=Choice(LOSS_AGGREGATIONS, LOSS_AGGREGATION_SPELLINGS),
    )
    num_iterations: int = knob(
        1,
        help="Passes over each drained buffer (μ): every pass takes one optimizer step per "
        "mini-batch. More than 1 needs a ratio loss (`policy_loss` `ppo` or `gspo`), which "
        "corrects for the policy having moved since the rollout.",
        check=Integer(1),
    )
    epsilon: float | None = knob(
        None,
        help="Clip range of a ratio loss (`ppo`, `gspo`): the ratio is kept within "
        "[1 − epsilon, 1 + epsilon_high]. None: 0.2 with `ppo`; with `gspo`, when `epsilon_high` "
        "is None too, GSPO's own range 3e-4 / 4e-4 (its paper). Only with a ratio loss.",
        check=Number(0.0, 1.0, min_inclusive=False, max_inclusive=False, optional=True),
    )
    epsilon_high: float | None = knob(
        None,
        help="Upper clip range of a ratio loss (clip-higher, DAPO); None uses `epsilon`.",
        check=Number(0.0, min_inclusive=False, optional=True),
    )
    clip_ratio_c: float | None = CLIP_RATIO_C(3.0)
    mask_truncated_completions: bool = knob(
        False,
        help="Leave completions that hit `max_new_tokens` without an EOS out of the loss (they "
        "still count in their group's advantages); logs `agent_{i}/truncated_fraction`.",
        check=Boolean(),
    )
    drop_zero_variance_groups: bool = knob(
        False,
        help="Skip groups whose K returns tie (no signal for a group baseline) in the update; "
        "with KL in the reward the KL-shaped returns are tested, so a group whose rewards tie "
        "keeps its KL penalty. Logs `agent_{i}/dropped_groups`. Single-process runs only.",
        check=Boolean(),
    )
    reward_weights: list[float] | None = knob(
        None,
        help="Weights of several reward functions (`reward_func=[f, g, ...]`): the reward is "
        "the weighted sum, and each function's mean is logged as `rewards/<name>_mean`; None "
        "weighs each 1.0. Its length must match the number of functions.",
        check=Custom(_check_weight_list, "None or a list of finite numbers"),
    )
    beta: float = knob(
        0.0,
        help="Weight β of a KL-to-reference term in the loss: β·KL per token (estimator "
        "`reference_kl_estimator`, k3 when None), aggregated like the policy loss; 0 turns it "
        "off. The alternative to `reference_kl_enabled` (KL in the reward); not both.",
        check=Number(0.0),
    )
    # Recipes for `MAGRPOConfig.preset(name, **fields)` (a run file's `preset:` key).
    presets: ClassVar[dict[str, dict[str, Any]]] = PRESETS
    preset_aliases: ClassVar[dict[str, str]] = PRESET_ALIASES

    def uses_greedy_baseline(self) -> bool:
        """Whether the advantage reads each node's measured baseline, the reward of a greedy
        joint rollout (MAReMax's ``advantage_mode="greedy"``); read from the registry when
        the config was checked."""
        return self._measures_baseline

    def _estimator(self):
        return algos.get("advantage", self.advantage_mode, "advantage_mode")

    def _uses_reference(self) -> bool:
        return super()._uses_reference() or self.beta > 0

    def _check_relations(self) -> None:
        super()._check_relations()
        check_kl_placement(self)
        note_discount_applies(
            self.discount, self.num_turns, type(self).__name__.removesuffix("Config")
        )
        self._refuse_inert_settings()
        self._gspo_settings()
        self._clip_range()
        self._check_joint_table()
        self._measures_baseline = bool(self._estimator().needs_baseline)

    def _check_joint_table(self) -> None:
        """An advantage that reads each node's joint table (counterfactual credit) needs the
        table that only ``cross`` rollouts build."""
        if self._estimator().needs_joint_table and self.joint_mode != "cross":
            raise ValueError(
                f"advantage_mode={self.advantage_mode!r} needs every combination of the agents' "
                f"samples, which joint_mode={self.joint_mode!r} does not build; set "
                "joint_mode='cross'."
            )

    def _gspo_settings(self) -> None:
        """GSPO weighs each completion once (its ratio is already length-normalized, as verl
        forces)."""
        if self.policy_loss != "gspo":
            return
        if self.loss_aggregation not in ("sum", "sequence_mean"):
            raise ValueError(
                f"loss_aggregation={self.loss_aggregation!r} does not apply to policy_loss="
                "'gspo': GSPO aggregates per sequence (each completion weighs 1/(K·groups)); "
                "leave loss_aggregation unset or set it to 'sequence_mean'."
            )
        # `sum` is the default: left unset, it is read as GSPO's per-sequence weighting.
        self.loss_aggregation = "sequence_mean"

    def _clip_range(self) -> None:
        """A ratio loss's clip range when ``epsilon`` is None: GSPO's own, much narrower one
        (when ``epsilon_high`` is None too), else PPO's 0.2. Without a ratio loss it stays None,
        so a config rebuilt from its fields passes the inert-setting check again."""
        if self.epsilon is not None or not self._uses_ratio():
            return
        if self.policy_loss == "gspo" and self.epsilon_high is None:
            self.epsilon, self.epsilon_high = GSPO_EPSILON, GSPO_EPSILON_HIGH
        else:
            self.epsilon = PPO_EPSILON

    def _uses_ratio(self) -> bool:
        return bool(algos.get("policy_loss", self.policy_loss, "policy_loss").needs_old_logps)

    def _refuse_inert_settings(self) -> None:
        """Settings that do nothing in the chosen mode raise, naming the field."""
        if not self.advantage_normalization:
            refuse_inert(
                self,
                "advantage_normalization_scope",
                "advantage_normalization is False; set it True to normalize in that scope",
            )
        if not self._uses_ratio():
            reason = (
                f"policy_loss={self.policy_loss!r} forms no ratio; use policy_loss='ppo' or "
                "'gspo' for clipped updates"
            )
            for name in ("epsilon", "epsilon_high", "clip_ratio_c"):
                refuse_inert(self, name, reason)
            if self.num_iterations > 1:
                raise ValueError(
                    f"num_iterations={self.num_iterations} reuses each rollout, but "
                    f"policy_loss={self.policy_loss!r} forms no ratio to correct for the "
                    "policy's change; use policy_loss='ppo' or 'gspo', or num_iterations=1."
                )
        if not self._uses_reference():
            refuse_inert(
                self,
                "reference_kl_estimator",
                "no KL term is on; set reference_kl_enabled=True (KL in the reward) or beta > 0 "
                "(KL in the loss)",
            )


@dataclass
class MAREINFORCEConfig(MAGRPOConfig):
    """MAGRPO settings with the raw-return advantage (no baseline)."""

    advantage_mode: str = "raw"


@dataclass
class MARLOOConfig(MAGRPOConfig):
    """MAGRPO settings with the leave-one-out baseline and, as in RLOO, no std normalization."""

    advantage_mode: str = "rloo"
    advantage_normalization: bool = False


@dataclass
class MAReMaxConfig(MAGRPOConfig):
    """MAGRPO settings with ReMax's baseline: the reward of one greedy joint rollout per node
    (``advantage_mode="greedy"``, the ReMax paper), and no std normalization.
    ``advantage_mode="max"`` subtracts the best of the K sampled returns instead (no extra
    rollout; CoMLRL 1.4.3's MAReMax default)."""

    advantage_mode: str = "greedy"
    advantage_normalization: bool = False
