"""The runs of the learning benchmark: which algorithm, which settings, on which tasks.

Each entry names a registered algorithm and the fields its section sets on top of the demo
set-up (``comlrl.core.commands.launch.DEFAULT_RUN``). Algorithm rows run on every task; menu
rows (one registered option each) run on length ratio only and report their sample efficiency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# the MAGRPO demo's sampling and logging, shared with the preference-family benchmark
from benchmarks.pbrl_learning import LOGGING, SAMPLING

# IAC/MAAC on the demo budget (6 epochs x 16 items x 4 samples, tiny critics), as in the audit.
AC_DEMO = {
    **SAMPLING,
    **LOGGING,
    "num_train_epochs": 6,
    "num_turns": 1,
    "num_generations": 4,
    "agent_learning_rate": 3.0e-3,
    "critic_learning_rate": 3.0e-3,
    "rollout_buffer_size": 16,
    "critic_type": "v",
    "value_loss_coef": 0.6,
}
IAC_DEMO = {**AC_DEMO, "use_separate_critic": True, "value_clip_range": 0.2}
# Two turns (one trajectory per item) so that λ has later turns to reach.
TWO_TURNS = {"num_turns": 2, "num_generations": 1}
IAC_2TURN = {**IAC_DEMO, **TWO_TURNS}
MAAC_2TURN = {**AC_DEMO, **TWO_TURNS}

# Fallback sections of the preference family (the audit's settings) for when the example
# file is not the length-ratio demo; the example's own section is preferred (see runfile).
DPO_FALLBACK = {
    **SAMPLING,
    **LOGGING,
    "num_train_epochs": 6,
    "preference_num_candidates": 6,
    "preference_pairs_per_sample": 4,
    "dpo_beta": 0.1,
    "agent_learning_rate": 1.0e-3,
    "train_batch_size": 4,
}
RLHF_FALLBACK = {
    **SAMPLING,
    **LOGGING,
    "num_train_epochs": 6,
    "num_generations": 4,
    "preference_num_candidates": 6,
    "preference_pairs_per_sample": 4,
    "reward_learning_rate": 1.0e-3,
    "reward_num_train_epochs": 3,
    "reward_train_batch_size": 4,
    "agent_learning_rate": 3.0e-3,
    "rollout_buffer_size": 4,
}
DPO_ITER_FALLBACK = {**DPO_FALLBACK, "num_iterations": 4, "num_train_epochs": 1}
RLHF_ITER_FALLBACK = {**RLHF_FALLBACK, "num_iterations": 3, "num_train_epochs": 2}
CENTRALIZED_FALLBACK = {**SAMPLING, **LOGGING, "num_train_epochs": 6, "max_new_tokens": 48}

# The adapters row's LoRA: every attention and MLP projection of the tiny agents.
LORA = {
    "r": 8,
    "lora_alpha": 16,
    "lora_dropout": 0.0,
    "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
}

ALGORITHM, MENU, UNTRAINED = "algorithm", "menu", "untrained"
# Credit rows: MAGRPO with and without per-agent credit on the credit task only.
CREDIT = "credit"
CREDIT_TASK = "length_credit"
# A family's algorithm with its config defaults: the section `comlrl train --algo <name>` gets
# (the demo's MAGRPO section moved over, keeping the fields the algorithm has: the demo's budget,
# sampling, learning rate and logging), nothing tuned.
DEFAULTS = "defaults"
DEFAULTS_SUFFIX = "_defaults"


@dataclass(frozen=True)
class RunSpec:
    """One catalogued run.

    ``section`` holds the algorithm section's fields; with ``example`` set, the section of
    ``examples/<example>`` is read at run time instead when that file is the length-ratio demo
    (``section`` is then the fallback). ``extra_rewards`` adds reward functions (by name, see
    ``runfile.EXTRA_REWARDS``) next to the task's; ``agent_model`` adds keys to the run file's
    ``agent_model`` section (``share_parameters``). ``same_as`` names the catalogued run whose
    settings a defaults row already equals: it is not trained again, the table shows that run's
    numbers on its row.
    """

    name: str
    algorithm: str
    kind: str
    section: dict[str, Any] = field(default_factory=dict)
    example: str | None = None
    extra_rewards: tuple[str, ...] = ()
    note: str = ""
    same_as: str | None = None
    agent_model: dict[str, Any] = field(default_factory=dict)

    def tasks(self) -> tuple[str, ...]:
        """The tasks this run trains on: menu and defaults rows measure on length ratio only,
        credit rows on the credit task only; the untrained agents are scored on every task."""
        if self.kind in (MENU, DEFAULTS):
            return ("length_ratio",)
        if self.kind == CREDIT:
            return (CREDIT_TASK,)
        return ALL_TASKS if self.kind == UNTRAINED else TASK_NAMES


# The tasks of the algorithm rows; every task the benchmark knows adds the credit task.
TASK_NAMES = ("length_ratio", "coding")
ALL_TASKS = (*TASK_NAMES, CREDIT_TASK)


def _menu(name: str, algorithm: str, note: str, **fields: Any) -> RunSpec:
    return RunSpec(name, algorithm, MENU, dict(fields), note=note)


def _magrpo_menu(name: str, note: str, **fields: Any) -> RunSpec:
    return _menu(name, "magrpo", note, **fields)


RUNS: tuple[RunSpec, ...] = (
    RunSpec("untrained", "magrpo", UNTRAINED, note="the initial agents, scored without training"),
    RunSpec("magrpo", "magrpo", ALGORITHM),
    RunSpec("mareinforce", "mareinforce", ALGORITHM),
    RunSpec("marloo", "marloo", ALGORITHM),
    RunSpec("maremax_greedy", "maremax", ALGORITHM, {"advantage_mode": "greedy"}),
    RunSpec("maremax_max", "maremax", ALGORITHM, {"advantage_mode": "max"}),
    RunSpec(
        "centralized_magrpo",
        "centralized_magrpo",
        ALGORITHM,
        CENTRALIZED_FALLBACK,
        example="centralized_magrpo.yaml",
    ),
    RunSpec("iac", "iac", ALGORITHM, IAC_DEMO),
    RunSpec("maac", "maac", ALGORITHM, AC_DEMO),
    RunSpec("madpo", "madpo", ALGORITHM, DPO_FALLBACK, example="madpo.yaml"),
    RunSpec("madpo_iter", "madpo_iter", ALGORITHM, DPO_ITER_FALLBACK, example="madpo_iter.yaml"),
    RunSpec("marlhf", "marlhf", ALGORITHM, RLHF_FALLBACK, example="marlhf.yaml"),
    RunSpec(
        "marlhf_iter", "marlhf_iter", ALGORITHM, RLHF_ITER_FALLBACK, example="marlhf_iter.yaml"
    ),
    _magrpo_menu("dr_grpo", "Dr. GRPO preset", preset="dr_grpo"),
    _magrpo_menu("reinforce_pp", "REINFORCE++ preset", preset="reinforce_pp"),
    _magrpo_menu("ppo_mu2", "clipped ratio, 2 passes", policy_loss="ppo", num_iterations=2),
    _magrpo_menu(
        "ppo_mu2_clip_higher",
        "clipped ratio, 2 passes, clip-higher",
        policy_loss="ppo",
        num_iterations=2,
        epsilon_high=0.28,
    ),
    _magrpo_menu("gspo_mu2", "sequence-level ratio", policy_loss="gspo", num_iterations=2),
    _magrpo_menu("dapo_token_mean", "DAPO token mean", loss_aggregation="token_mean"),
    _magrpo_menu("mask_truncated", "truncated completions masked", mask_truncated_completions=True),
    _magrpo_menu("drop_zero_variance", "tied groups dropped", drop_zero_variance_groups=True),
    RunSpec(
        "reward_weights",
        "magrpo",
        MENU,
        {"reward_weights": [1.0, 0.5]},
        extra_rewards=("both_answered",),
        note="task reward + 0.5 x both answered",
    ),
    _magrpo_menu(
        "kl_in_reward",
        "k1 KL in the reward (coef 0.001)",
        reference_kl_enabled=True,
        reference_kl_coef=0.001,
    ),
    _magrpo_menu(
        "kl_in_reward_coef0.01",
        "k1 KL in the reward (coef 0.01)",
        reference_kl_enabled=True,
        reference_kl_coef=0.01,
    ),
    _magrpo_menu("kl_in_loss", "KL in the loss (beta 0.04)", beta=0.04),
    # One decode pass over several buffers (docs/performance.md): later buffers are off-policy.
    _magrpo_menu("span_2_buffers", "rollouts span 2 buffers, uncorrected", rollout_batch_size=8),
    _magrpo_menu(
        "span_2_buffers_ppo",
        "rollouts span 2 buffers, ratio-corrected",
        rollout_batch_size=8,
        policy_loss="ppo",
    ),
    _magrpo_menu("span_4_buffers", "rollouts span 4 buffers, uncorrected", rollout_batch_size=16),
    _magrpo_menu(
        "span_4_buffers_ppo",
        "rollouts span 4 buffers, ratio-corrected",
        rollout_batch_size=16,
        policy_loss="ppo",
    ),
    _magrpo_menu(
        "one_buffer_ppo", "one buffer per rollout, ratio loss (on-policy)", policy_loss="ppo"
    ),
    # Memory options (docs/real_models.md): what each does to learning on the demo.
    _magrpo_menu("bf16", "bf16 compute, fp32 master weights", bf16=True),
    _magrpo_menu(
        "gradient_checkpointing",
        "activations recomputed in the backward",
        gradient_checkpointing=True,
    ),
    # Full weights (the magrpo row), one adapter per agent on one frozen base, one shared model.
    _magrpo_menu("adapters", "LoRA r=8 per agent on one frozen base", peft_config=LORA),
    _magrpo_menu(
        "adapters_lr0.03",
        "LoRA r=8, learning rate 10x",
        peft_config=LORA,
        agent_learning_rate=0.03,
    ),
    RunSpec(
        "parameter_sharing",
        "magrpo",
        MENU,
        note="one model object for both agents",
        agent_model={"share_parameters": True},
    ),
    _menu("iac_2turn", "iac", "two turns, TD(0)", **IAC_2TURN),
    _menu("iac_2turn_gae", "iac", "two turns, GAE(0.95)", **IAC_2TURN, gae_lambda=0.95),
    _menu("maac_2turn", "maac", "two turns, TD(0)", **MAAC_2TURN),
    _menu("maac_2turn_gae", "maac", "two turns, GAE(0.95)", **MAAC_2TURN, gae_lambda=0.95),
    RunSpec(
        "ippo",
        "iac",
        MENU,
        {**IAC_DEMO, "policy_loss": "ppo", "num_iterations": 2, "epsilon_high": 0.28},
        note="IAC with 2 clipped passes (IPPO)",
    ),
    RunSpec(
        "mappo",
        "maac",
        MENU,
        {**AC_DEMO, "policy_loss": "ppo", "num_iterations": 2, "epsilon_high": 0.28},
        note="MAAC with 2 clipped passes (MAPPO)",
    ),
)


# The credit task (only one agent's answer counts on each prompt): MAGRPO's demo section with
# shared-reward advantages (aligned, the demo), the cross table's marginal returns under the
# group-mean baseline, and counterfactual credit. All three generate K = 4 completions per
# agent per prompt; the cross rows score K^2 joint actions per prompt from them.
CREDIT_ROWS: tuple[RunSpec, ...] = (
    RunSpec(CREDIT + "_shared", "magrpo", CREDIT, note="shared reward (aligned, the demo)"),
    RunSpec(
        CREDIT + "_cross_mean",
        "magrpo",
        CREDIT,
        {"joint_mode": "cross"},
        note="cross table, group-mean baseline",
    ),
    RunSpec(
        CREDIT + "_counterfactual",
        "magrpo",
        CREDIT,
        {"joint_mode": "cross", "advantage_mode": "counterfactual"},
        note="counterfactual credit",
    ),
)
RUNS = RUNS + CREDIT_ROWS


def _defaults(algorithm: str, same_as: str | None = None) -> RunSpec:
    note = f"the same settings as the {same_as} row" if same_as else ""
    return RunSpec(algorithm + DEFAULTS_SUFFIX, algorithm, DEFAULTS, note=note, same_as=same_as)


# Every family's algorithm with its defaults. The REINFORCE rows above already run the demo's
# section with nothing on top, which is what `--algo` gives them, so they are not run twice.
DEFAULT_ROWS: tuple[RunSpec, ...] = (
    _defaults("magrpo", same_as="magrpo"),
    _defaults("mareinforce", same_as="mareinforce"),
    _defaults("marloo", same_as="marloo"),
    _defaults("maremax", same_as="maremax_greedy"),
    _defaults("centralized_magrpo"),
    _defaults("iac"),
    _defaults("maac"),
    _defaults("madpo"),
    _defaults("madpo_iter"),
    _defaults("marlhf"),
    _defaults("marlhf_iter"),
)
RUNS = RUNS + DEFAULT_ROWS

BY_NAME = {spec.name: spec for spec in RUNS}

# `python -m benchmarks.learning check`: a few rows that cover every family, two seeds each.
CHECK_RUNS = ("magrpo", "marloo", "iac", "maac", "madpo_iter", "marlhf_iter")
CHECK_SEEDS = (0, 1)


def select(names: list[str] | None) -> list[RunSpec]:
    """The catalogued runs named in ``names`` (all when None), in catalogue order; a defaults
    row that equals another row (``same_as``) is never run itself."""
    if not names:
        return [spec for spec in RUNS if spec.same_as is None]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"--runs: unknown run name(s) {unknown}; valid: {sorted(BY_NAME)}.")
    # a defaults row that equals another row runs as that row
    wanted = {BY_NAME[n].same_as or n for n in names}
    return [spec for spec in RUNS if spec.name in wanted and spec.same_as is None]
