"""Configuration of the REINFORCE family (MAGRPO and its variants)."""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    LOSS_TYPE,
    NUM_GENERATIONS,
    TRL_LOSS_TYPES,
)
from comlrl.reinforce.kl import check_kl_placement
from comlrl.reinforce.presets import (
    RemembersExplicitFields,
    apply_preset,
    refuse_inert,
    resolve_alias,
)

NORMALIZATION_SCOPES = ("group", "batch")
LOSS_AGGREGATIONS = ("sum", "sequence_mean", "token_mean", "constant")
VARIANTS = ("grpo", "dr_grpo", "reinforce_pp")
VARIANT_ALIASES = {"dr.grpo": "dr_grpo", "reinforce++": "reinforce_pp"}
REMAX_BASELINES = ("greedy", "max")
# GSPO's clip range from its paper (the sequence ratio is a per-token geometric mean, so it
# moves far less than a token ratio); used when neither epsilon nor epsilon_high is given.
GSPO_EPSILON, GSPO_EPSILON_HIGH = 3e-4, 4e-4


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


@dataclass
class MAGRPOConfig(RemembersExplicitFields, CommonConfig):
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
        "`token_mean`. `policy_loss='gspo'` always uses `sequence_mean` (other values raise).",
        check=Choice(LOSS_AGGREGATIONS, {"none": "sum"}),
    )
    loss_type: str | None = LOSS_TYPE(None)
    num_iterations: int = knob(
        1,
        help="Passes over each drained buffer (μ): every pass takes one optimizer step per "
        "mini-batch. More than 1 needs a ratio loss (`policy_loss` `ppo` or `gspo`), which "
        "corrects for the policy having moved since the rollout.",
        check=Integer(1),
    )
    epsilon: float = knob(
        0.2,
        help="Clip range of a ratio loss (`ppo`, `gspo`): the ratio is kept within "
        "[1 − epsilon, 1 + epsilon_high]. With `gspo`, when neither this nor `epsilon_high` is "
        "set, GSPO's own range 3e-4 / 4e-4 (its paper) is used.",
        check=Number(0.0, 1.0, min_inclusive=False, max_inclusive=False),
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
    variant: str | None = knob(
        None,
        help="A preset of other fields, filling only those left unset (a conflicting explicit "
        "setting raises): `dr_grpo` turns off std normalization and uses `constant` loss "
        "aggregation; `reinforce_pp` z-scores over the batch; `grpo` and None change nothing.",
        check=Choice(VARIANTS, VARIANT_ALIASES, optional=True),
    )

    def uses_greedy_baseline(self) -> bool:
        """Whether each node's baseline is the reward of a greedy joint rollout (MAReMax's,
        ``advantage_mode="greedy"``)."""
        return self.advantage_mode == "greedy"

    def advantage_estimator(self) -> str:
        """The registered advantage estimator the update uses."""
        return self.advantage_mode

    def _uses_reference(self) -> bool:
        return super()._uses_reference() or self.beta > 0

    def _check_relations(self) -> None:
        super()._check_relations()
        check_kl_placement(self)
        note_discount_applies(
            self.discount, self.num_turns, type(self).__name__.removesuffix("Config")
        )
        resolve_alias(self, "loss_type", "loss_aggregation", TRL_LOSS_TYPES)
        apply_preset(self)
        self._gspo_settings()
        self._refuse_inert_settings()
        self._check_joint_table()

    def _check_joint_table(self) -> None:
        """An advantage that reads each node's joint table (counterfactual credit) needs the
        table that only ``cross`` rollouts build."""
        fn = algos.get("advantage", self.advantage_estimator(), "advantage_mode")
        if getattr(fn, "needs_joint_table", False) and self.joint_mode != "cross":
            raise ValueError(
                f"advantage_mode={self.advantage_mode!r} needs every combination of the agents' "
                f"samples, which joint_mode={self.joint_mode!r} does not build; set "
                "joint_mode='cross'."
            )

    def _gspo_settings(self) -> None:
        """GSPO weighs each completion once (its ratio is already length-normalized, as verl
        forces), and clips in its own, much narrower, range unless one is given."""
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
        if not {"epsilon", "epsilon_high"} & self.explicit_fields:
            self.epsilon, self.epsilon_high = GSPO_EPSILON, GSPO_EPSILON_HIGH

    def _refuse_inert_settings(self) -> None:
        """Settings that do nothing in the chosen mode raise, naming the field."""
        if not self.advantage_normalization:
            refuse_inert(
                self,
                "advantage_normalization_scope",
                "advantage_normalization is False; set it True to normalize in that scope",
            )
        if not algos.get("policy_loss", self.policy_loss, "policy_loss").needs_old_logps:
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
    """MAGRPO settings with the ReMax baseline: by default the reward of the greedy joint
    response at each node, and no std normalization (as in the ReMax paper)."""

    advantage_mode: str = "max"
    advantage_normalization: bool = False
    baseline: str = knob(
        "greedy",
        help="ReMax's baseline: `greedy` subtracts the reward of one extra greedy joint "
        "rollout per node (the ReMax paper; its cost is logged as `timing/greedy_baseline`); "
        "`max` subtracts the best of the K sampled returns (which includes the sample itself).",
        check=Choice(REMAX_BASELINES),
    )

    def uses_greedy_baseline(self) -> bool:
        """True with ``baseline="greedy"``."""
        return self.baseline == "greedy"

    def advantage_estimator(self) -> str:
        """``greedy`` with the greedy baseline, else ``advantage_mode``."""
        return "greedy" if self.uses_greedy_baseline() else self.advantage_mode

    def _refuse_inert_settings(self) -> None:
        super()._refuse_inert_settings()
        refuse_inert(
            self,
            "advantage_mode",
            "MAReMax's baseline is chosen by `baseline` (greedy or max); use MAGRPOConfig for "
            "another advantage_mode",
        )
        if self.baseline == "max":
            self.advantage_mode = "max"
