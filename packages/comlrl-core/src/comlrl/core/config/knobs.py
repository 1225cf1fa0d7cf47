"""Knobs that several, but not all, families declare.

Each is a :class:`~comlrl.core.config.fields.Knob`: its help text and usual check live here, once;
a family config declares the field with its own default, e.g.
``num_generations: int = NUM_GENERATIONS(4, check=Integer(2))``. The critic knobs are here
because both the actor-critic family and MARLHF's RL phase read them, and neither package
depends on the other.
"""

from __future__ import annotations

from comlrl.core.config.fields import Boolean, Choice, Devices, Integer, Knob, Number
from comlrl.core.rollout.tree import JOINT_MODE_ALIASES, JOINT_MODES

CRITIC_TYPES = ("v", "q")

NUM_GENERATIONS = Knob(
    help="Completions K each agent samples per prompt at every node of the rollout tree.",
    check=Integer(1),
)
ITEM_SEEDED_SAMPLING = Knob(
    help="Seed each item's sampling from (seed, epoch, item, turn, branch, agent), so an item "
    "gets the same completions on any rank or in any batch (one `generate` call per item).",
    check=Boolean(),
)
JOINT_MODE = Knob(
    help="How the agents' samples form joint actions: `aligned` joins the j-th sample of every "
    "agent (K joint actions per node); `cross` takes every combination (K^N).",
    check=Choice(JOINT_MODES, JOINT_MODE_ALIASES),
)
# The families pass the check: the modes are REINFORCE's until a registry lists them.
ADVANTAGE_MODE = Knob(
    help="Baseline subtracted from each return within its group of K siblings: `mean` (GRPO), "
    "`raw` no baseline (REINFORCE), `max` (ReMax), `rloo` leave-one-out (RLOO), `greedy` the "
    "reward of one extra greedy joint rollout per node (MAReMax's default; logged as "
    "`timing/greedy_baseline`), `counterfactual` per-agent credit from the `cross` joint "
    "table (the mean return with the agent's completion held fixed, minus the node's mean; "
    "needs `joint_mode: cross`), or any estimator registered with `register_advantage`.",
)

CRITIC_LEARNING_RATE = Knob(
    help="Learning rate of the critics (of the value heads, when there are no separate "
    "critics); None uses `agent_learning_rate`.",
    check=Number(0.0, min_inclusive=False, optional=True),
)
CRITIC_DEVICES = Knob(
    help="Where the critics live; None puts each with its agent.",
    check=Devices(),
)
USE_SEPARATE_CRITIC = Knob(
    help="True: each agent's critic is a separate model; False: a value head on the agent's "
    "own model.",
    check=Boolean(),
)
CRITIC_TYPE = Knob(
    help="`v`: the critic values the history, V(h); `q`: the history and the answer, Q(h, a).",
    check=Choice(CRITIC_TYPES),
)
VALUE_LOSS_COEF = Knob(
    help="Weight of the critic's loss.",
    check=Number(0.0, min_inclusive=False),
)
VALUE_CLIP_RANGE = Knob(
    help="Keep each new value prediction within this distance of the old one in the value "
    "loss; None does not clip.",
    check=Number(0.0, min_inclusive=False, optional=True),
)
CRITIC_VALUE_HEAD_HIDDEN_DIM = Knob(
    help="Hidden width h of a separate critic's head, `Linear(d, h) → tanh → Linear(h, 1)`; "
    "None: one linear layer.",
    check=Integer(1, optional=True),
)
VALUE_HEAD_HIDDEN_DIM = Knob(
    help="Hidden width h of a value head on the actor (`use_separate_critic=False`); None: one "
    "linear layer.",
    check=Integer(1, optional=True),
)
CLIP_RATIO_C = Knob(
    help="The dual clip's c (as verl's `clip_ratio_c`): with a negative advantage a token's "
    "ratio loss is at most c·|A|, so a stale token with a large ratio cannot dominate the "
    "update; it must be > 1; None turns the dual clip off. Only with a ratio loss.",
    check=Number(1.0, min_inclusive=False, optional=True),
)

# TRL's GRPOTrainer `loss_type` names of what is here `loss_aggregation`.
TRL_LOSS_TYPES = {
    "grpo": "sequence_mean",
    "bnpo": "token_mean",
    "dapo": "token_mean",
    "dr_grpo": "constant",
}
LOSS_TYPE = Knob(
    help="TRL's name for the loss aggregation, accepted as an alias of `loss_aggregation`: "
    "`grpo` = `sequence_mean`, `bnpo` and `dapo` = `token_mean` (pooled over ranks, as "
    "`dapo`), `dr_grpo` = `constant`; None: `loss_aggregation` decides. Setting both to "
    "disagreeing values raises.",
    check=Choice(list(TRL_LOSS_TYPES), optional=True),
)
