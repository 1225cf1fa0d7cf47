"""What MARLHF's RL phase runs on: the RL algorithm found through the registry and built on
MARLHF's agents, its config (MARLHF's shared settings with the ``rl`` section on top), its
units, and the joint reward model's score as its reward.

The RL algorithm is a trainer of its family that MARLHF holds and drives through the core
contract: MARLHF's ``collect``/``update`` are the algorithm's, the core loop buffers into the
algorithm's buffer, and the algorithm works through MARLHF's reporting and timer
(:func:`build_rl_algorithm`), so the run has one logger, one logging cadence, one env-step counter
and one count of optimizer steps.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from comlrl.core.checkpoint.trainer_state import STEP_STATE_KEYS
from comlrl.core.loop import EndOfPass
from comlrl.core.loop.timing import PhaseTimer
from comlrl.core.plugins import PROVIDERS, load_algorithm
from comlrl.pbrl.reward_model import format_joint_text, score_texts

# Fields whose None is a real setting (not "use the RL trainer's default").
_NONE_IS_A_SETTING = {"top_k", "early_termination_threshold", "max_grad_norm", "value_clip_range"}
# Same name, another meaning: the iterative trainers' ``num_iterations`` (the alias of
# ``num_online_iterations``) is not the RL algorithm's passes per rollout.
# ``peft_config``: the RL phase trains MARLHF's agents as they are, adapters already attached.
_NOT_SHARED = {"num_iterations", "peft_config"}


def rl_config(args: Any, cls: type, num_agents: int) -> Any:
    """The RL phase's config: ``cls`` (the RL algorithm's config) with every field it shares
    with MARLHF's ``args`` (a None left to the RL default unless None is a setting of its own),
    then the ``rl`` section of ``args`` on top, single-turn, for ``num_agents`` agents."""
    names = {f.name for f in dataclasses.fields(cls)}
    values = {}
    for f in dataclasses.fields(args):
        if f.name not in names or f.name in _NOT_SHARED:
            continue
        value = getattr(args, f.name)
        if value is None and f.name not in _NONE_IS_A_SETTING:
            continue
        values[f.name] = value
    # The RL phase's reward is the reward model's (reward_model_reward): one value, or one row of
    # per-agent values, per joint response. Saying so spares the caller's probe of an ambiguous
    # batch, which would score a joint response twice (and count it twice in the on-policy
    # check). ``reward_call_mode`` of ``args`` is the task reward's.
    if "reward_call_mode" in names:
        values["reward_call_mode"] = "batch"
    section = dict(args.rl or {})
    unknown = sorted(set(section) - names)
    if unknown:
        raise ValueError(
            f"rl.{unknown[0]} is not a setting of rl_algorithm={args.rl_algorithm!r} "
            f"({cls.__name__}); valid keys: {', '.join(sorted(names))}."
        )
    values.update(section)
    values["num_turns"] = 1
    if "num_agents" in names:
        values["num_agents"] = num_agents
    if "collaboration_mode" in names:
        values.pop("collaboration_mode")
    values.pop("output_dir", None)
    try:
        return cls(**values)
    except ValueError as exc:
        raise ValueError(
            f"the RL phase's config (rl_algorithm={args.rl_algorithm!r}): {exc}"
        ) from exc


# The core's state keys of the algorithm taking the steps: a MARLHF checkpoint holds them in
# the RL state only.
RL_OWNED_STATE_KEYS = STEP_STATE_KEYS


@dataclass
class RLBatch:
    """A unit of the RL phase: one global rollout batch, ``count`` items from ``start`` of the
    epoch's order (the end of an RL epoch is an :class:`~comlrl.core.loop.EndOfPass`)."""

    start: int
    count: int


def rl_units(trainer: Any) -> list:
    """One RL epoch: a unit per global rollout batch of the dataset, then its end. Under
    several processes a global batch is every rank's batch together, and the last
    ``len % world_size`` items are left out so the ranks get equal shares."""
    world = trainer.dist.world_size
    size = max(1, trainer.rl_trainer.items_per_batch()) * world
    total = len(trainer.get_train_dataloader())
    total -= total % world
    batches = [RLBatch(s, min(size, total - s)) for s in range(0, total, size)]
    return [*batches, EndOfPass()]


def build_rl_algorithm(trainer: Any, cls: type, *, metrics_callback, critic_source, critics):
    """The RL algorithm ``cls`` built on MARLHF ``trainer``'s agents, tokenizers, data and
    formatters, with the reward model's score as its reward; it reports and times through the
    trainer's collaborators (its timer then knows the phases of both) and counts in the
    trainer's run state (one step count and one set of optimizer steps for the run)."""
    t = trainer
    fields = {f.name for f in dataclasses.fields(cls.inputs_cls)}
    values: dict[str, Any] = dict(
        agents=list(t.agents),
        num_agents=t.num_agents,
        tokenizer=list(t.tokenizers),
        model_config=t.model_config,
        train_dataset=t.train_dataset,
        reward_func=t.rm_reward,
        formatters=list(t.formatters),
        args=rl_config(t.args, cls.default_config_cls, t.num_agents),
    )
    extras = dict(metrics_callback=metrics_callback, critic_model=critic_source, critics=critics)
    for key, value in extras.items():
        if value is None:
            continue
        if key not in fields:
            if key == "metrics_callback":
                continue  # a callback for actor-critic RL phases only
            raise ValueError(f"rl_algorithm={t.args.rl_algorithm!r} takes no {key}.")
        values[key] = value
    rl = cls.from_inputs(cls.inputs_cls(**values))
    rl.verbose = False
    rl.run_state = rl.monitors.state = t.run_state
    t.timing_phases = tuple(dict.fromkeys((*t.timing_phases, *rl.timing_phases)))
    t.timing = rl.timing = t.reporting.timing = PhaseTimer(t.timing_phases)
    rl.reporting = t.reporting
    return rl


def resolve_rl_algorithm(name: str):
    """The trainer class registered as ``name``, with an install hint when it is missing."""
    try:
        return load_algorithm(name)
    except ValueError as exc:
        provider = PROVIDERS.get(name, "the package that provides it")
        raise ValueError(
            f"rl_algorithm={name!r} is not installed; MARLHF runs its RL phase with it. Install "
            f"{provider} (pip install {provider}). ({exc})"
        ) from exc


def reward_model_reward(trainer: Any, agent_completions, prompts, batch_items) -> list:
    """The RL phase's reward (MARLHF's ``rm_reward``): the joint reward model's score of each
    joint response, or (a reward model of per-agent rewards) one row of per-agent scores per
    joint response.

    Every agent's prompt comes from its formatter (MARLHF is single-turn, so that is the prompt
    the agent answered); agent 0's is the one the rollout passes in.
    """
    t = trainer
    n = len(agent_completions)
    owners = list(range(n)) if t.reward_model_per_agent else [None]
    texts = []
    for j, item in enumerate(batch_items):
        actor_prompts = [prompts[j]] + [t.formatters[i](item) for i in range(1, n)]
        joint = [c[j] for c in agent_completions]
        texts.extend(format_joint_text(actor_prompts, joint, agent) for agent in owners)
    scores = score_texts(t.reward_model, t.reward_tokenizer, texts, t.args.reward_max_length)
    if not t.reward_model_per_agent:
        result = scores
    else:
        result = [scores[j * n : (j + 1) * n] for j in range(len(batch_items))]
    if t.args.reward_model_onpolicy_check:
        # the check ranks joint responses: per-agent scores enter as their mean
        shared = scores if not t.reward_model_per_agent else [sum(r) / n for r in result]
        t.rm_check.observe(t, agent_completions, prompts, batch_items, shared)
    return result


def mean_joint_scores(trainer: Any, prompts_per_actor, completions_per_actor) -> list[float]:
    """The reward model's score of each joint response ``j`` (``prompts_per_actor[i][j]``,
    ``completions_per_actor[i][j]``); a model of per-agent rewards scores every agent's own
    reward and the mean is returned (a shared ranking for the iterative trainers)."""
    t = trainer
    n = len(completions_per_actor[0])
    owners = range(len(prompts_per_actor)) if t.reward_model_per_agent else [None]
    texts = [
        format_joint_text(
            [p[j] for p in prompts_per_actor], [c[j] for c in completions_per_actor], agent
        )
        for j in range(n)
        for agent in owners
    ]
    scores = score_texts(t.reward_model, t.reward_tokenizer, texts, t.args.reward_max_length)
    width = len(owners)
    return [sum(scores[j * width : (j + 1) * width]) / width for j in range(n)]
