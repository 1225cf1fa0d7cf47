"""The multi-turn rollout tree.

A node is one (turn, branch) state of one dataset item. At a node every agent samples K
completions; joint actions pair them (aligned: index j across agents, K actions; cross: the
Cartesian product, K^N actions). Each joint action is scored, and unless the branch stops, an
external transition turns it into the next turn's per-agent prompts: a child node.

The tree is built one turn level at a time across all items of a batch, so each agent makes one
``generate`` call per level and the reward is called once per level.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.core.rewards.shapes import RewardScores
from comlrl.core.rollout.formatters import Formatter
from comlrl.core.rollout.generation import PromptSamples

JOINT_MODES = ("aligned", "cross")
JOINT_MODE_ALIASES = {"align": "aligned", "crossed": "cross"}

# generate_fn(prompts_per_agent) -> samples_per_agent, each list aligned with its prompts
# generate_fn(prompts_per_agent[, keys]) -> each agent's samples per prompt; ``keys`` (one per
# prompt) is passed only with item-seeded sampling.
GenerateFn = Callable[..., list[list[PromptSamples]]]
# score_fn(agent_completions, prompts, batch_items) -> one reward per joint action, or
# RewardScores (one shared value or one value per agent for each joint action)
ScoreFn = Callable[..., "list[float] | RewardScores"]


@dataclass
class TreeNode:
    """One (turn, branch) state of one item.

    ``rewards[a]`` and ``returns[a]`` are joint action ``a``'s shared values (with per-agent
    rewards: the mean over the agents). ``agent_rewards[a][i]`` is agent ``i``'s own reward when
    the reward function gave per-agent values (empty otherwise). ``penalties[a][i]`` is what a
    reward transform (:mod:`comlrl.core.rewards.shaping`, e.g. KL to the reference) takes from
    agent ``i``'s reward of action ``a`` (empty: nothing). ``agent_return_rows[a][i]`` is agent
    ``i``'s own return, built from its own, shaped, rewards at every turn; ``returns`` stay the
    environment's.
    """

    item_index: int
    item: dict
    turn: int
    prompts: list[str]
    raw_prompts: list[str]
    prompt_history: list[list[str]]
    response_history: list[list[str]]
    samples: list[PromptSamples] = field(default_factory=list)
    joint_actions: list[tuple[int, ...]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    children: list[TreeNode | None] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    agent_rewards: list[list[float]] = field(default_factory=list)
    agent_return_rows: list[list[float]] = field(default_factory=list)
    penalties: list[list[float]] = field(default_factory=list)
    step: int = 0
    terminated: bool = False
    branch: tuple[int, ...] = ()  # joint-action indices from the root to this node

    def completions(self, action: int) -> list[str]:
        """The N completion texts of joint action ``action``."""
        return [self.samples[i].texts[k] for i, k in enumerate(self.joint_actions[action])]

    @property
    def per_agent(self) -> bool:
        """Whether this node's rewards are per agent (the reward gave each agent a value)."""
        return bool(self.agent_rewards)

    def reward_of(self, action: int, agent: int) -> float:
        """Agent ``agent``'s reward for joint action ``action`` (the shared one if not per
        agent)."""
        if self.agent_rewards:
            return self.agent_rewards[action][agent]
        return self.rewards[action]

    def shaped_reward_of(self, action: int, agent: int) -> float:
        """Agent ``agent``'s reward for joint action ``action`` less its shaping penalty."""
        penalty = self.penalties[action][agent] if self.penalties else 0.0
        return self.reward_of(action, agent) - penalty

    def return_of(self, action: int, agent: int) -> float:
        """Agent ``agent``'s return for joint action ``action``."""
        if self.agent_return_rows:
            return self.agent_return_rows[action][agent]
        return self.returns[action]

    def walk(self):
        """This node and its descendants, pre-order."""
        yield self
        for child in self.children:
            if child is not None:
                yield from child.walk()


def joint_action_indices(num_agents: int, num_samples: int, joint_mode: str):
    """Per-agent sample indices of every joint action at a node."""
    if joint_mode == "cross" and num_agents > 1:
        return list(itertools.product(range(num_samples), repeat=num_agents))
    return [(k,) * num_agents for k in range(num_samples)]


def nodes_per_tree(num_turns: int, num_samples: int, joint_mode: str, num_agents: int) -> int:
    """The nodes of one item's full tree (no early termination): every joint action at a
    node below the last turn has a child, so ``1 + J + ... + J^(T-1)`` with J joint actions
    per node (K aligned, K^N crossed)."""
    joint = len(joint_action_indices(num_agents, num_samples, joint_mode))
    return sum(joint**t for t in range(num_turns))


def _transition_accepts(func: Callable, name: str) -> bool:
    try:
        return name in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False


@dataclass
class TreeSettings:
    """How trees grow: agents, turns, samples per node, pairing, stopping and discounting."""

    num_agents: int
    num_turns: int
    num_samples: int
    joint_mode: str = "aligned"
    early_termination_threshold: float | None = None
    discount: float = 1.0
    external_prompt_passthrough: bool = False


def build_trees(
    items: Sequence[dict],
    settings: TreeSettings,
    formatters: Sequence[Formatter],
    generate_fn: GenerateFn,
    score_fn: ScoreFn,
    external_transition: Callable[..., Any] | None = None,
    first_step: int = 0,
    item_offset: int = 0,
    keyed: bool = False,
) -> list[TreeNode]:
    """Roll out one tree per item; return the roots with rewards, returns and steps set.

    A node's ``step`` is the run's count of joint actions once it is rolled out, from
    ``first_step``: it advances by the number of joint actions at each node, in pre-order per item
    and items in order, so it matches a depth-first, one-item-at-a-time rollout.

    With ``keyed`` the generate function is called as ``generate_fn(prompts_per_agent, keys)``,
    where ``keys[j]`` identifies node ``j`` of the level independently of the batch:
    ``(item_offset + item index, turn, *branch)`` (item-seeded sampling uses it).
    """
    n = settings.num_agents
    level: list[TreeNode] = []
    for idx, item in enumerate(items):
        prompts = [formatters[i](item) for i in range(n)]
        level.append(
            TreeNode(
                idx, item, 0, prompts, list(prompts), [[p] for p in prompts], [[] for _ in range(n)]
            )
        )
    roots = list(level)
    for turn in range(settings.num_turns):
        if not level:
            break
        _sample_level(level, settings, generate_fn, item_offset if keyed else None)
        _score_level(level, score_fn)
        if turn + 1 >= settings.num_turns:
            break
        level = _expand_level(level, settings, formatters, external_transition)
    counter = first_step
    for root in roots:
        for node in root.walk():
            counter += len(node.joint_actions)
            node.step = counter
        compute_returns(root, settings.discount)
    return roots


def _sample_level(
    level: list[TreeNode],
    settings: TreeSettings,
    generate_fn: GenerateFn,
    item_offset: int | None = None,
) -> None:
    prompts_per_agent = [[node.prompts[i] for node in level] for i in range(settings.num_agents)]
    if item_offset is None:
        samples = generate_fn(prompts_per_agent)
    else:
        keys = [(item_offset + node.item_index, node.turn, *node.branch) for node in level]
        samples = generate_fn(prompts_per_agent, keys)
    actions = joint_action_indices(settings.num_agents, settings.num_samples, settings.joint_mode)
    for j, node in enumerate(level):
        node.samples = [samples[i][j] for i in range(settings.num_agents)]
        node.joint_actions = list(actions)


def _score_level(level: list[TreeNode], score_fn: ScoreFn) -> None:
    n = len(level[0].samples)
    completions: list[list[str]] = [[] for _ in range(n)]
    prompts, batch_items, owners = [], [], []
    for node in level:
        for a in range(len(node.joint_actions)):
            for i, text in enumerate(node.completions(a)):
                completions[i].append(text)
            prompts.append(node.raw_prompts[0])
            batch_items.append(node.item)
            owners.append(node)
    scores = score_fn(completions, prompts=prompts, batch_items=batch_items)
    if isinstance(scores, RewardScores):
        rewards = scores.shared
        rows = scores.rows if scores.per_agent else None
    else:
        rewards, rows = scores, None
    pos = 0
    for node in level:
        count = len(node.joint_actions)
        node.rewards = [float(r) for r in rewards[pos : pos + count]]
        node.agent_rewards = [] if rows is None else [list(r) for r in rows[pos : pos + count]]
        pos += count


def _expand_level(level, settings: TreeSettings, formatters, transition) -> list[TreeNode]:
    if transition is None:
        raise ValueError("Multi-turn rollouts require an external_transition.")
    threshold = settings.early_termination_threshold
    wants_item = _transition_accepts(transition, "batch_item")
    nxt: list[TreeNode] = []
    n = settings.num_agents
    for node in level:
        mean_reward = sum(node.rewards) / len(node.rewards)
        node.terminated = threshold is not None and mean_reward > threshold
        node.children = [None] * len(node.joint_actions)
        if node.terminated:
            continue
        for a in range(len(node.joint_actions)):
            actions = node.completions(a)
            responses = [node.response_history[i] + [actions[i]] for i in range(n)]
            kwargs = dict(
                prompt=node.item.get("prompt", ""),
                agent_completions=list(actions),
                num_agents=n,
                prompt_history_per_agent=[list(h) for h in node.prompt_history],
                response_history_per_agent=[list(h) for h in responses],
            )
            if wants_item:
                kwargs["batch_item"] = node.item
            ext = _check_transition_output(transition, transition(**kwargs), n)
            if settings.external_prompt_passthrough:
                prompts = list(ext)
            else:
                prompts = [formatters[i](node.item, external_prompt=ext[i]) for i in range(n)]
            child = TreeNode(
                node.item_index,
                node.item,
                node.turn + 1,
                prompts,
                ext,
                [node.prompt_history[i] + [ext[i]] for i in range(n)],
                responses,
            )
            child.branch = node.branch + (a,)
            node.children[a] = child
            nxt.append(child)
    return nxt


def _check_transition_output(transition: Callable, ext: Any, n: int) -> list[str]:
    """The transition's per-agent prompts, or a ValueError naming the transition: converting
    other values to text would silently train on prompts like ``"None"``."""
    name = getattr(transition, "__qualname__", None) or type(transition).__name__
    expected = f"per-agent prompts: a list of {n} strings"
    if not isinstance(ext, (list, tuple)) or len(ext) != n:
        size = f" of length {len(ext)}" if isinstance(ext, (list, tuple)) else ""
        raise ValueError(
            f"external_transition {name!r} must return {expected}, got {type(ext).__name__}{size}."
        )
    for i, prompt in enumerate(ext):
        if not isinstance(prompt, str):
            raise ValueError(
                f"external_transition {name!r} must return {expected}; entry {i} (agent {i}) is "
                f"{type(prompt).__name__}: {prompt!r}."
            )
    return list(ext)


def compute_returns(node: TreeNode, discount: float) -> list[float]:
    """The one return recursion, ``R = r + discount * mean(children's R)``, over the subtree at
    ``node``: the shared returns from the environment's rewards, and each agent's from its own
    shaped rewards (the same numbers when rewards are shared and nothing shapes them). A reward
    transform runs it again once it has set its penalties. Returns ``node.returns``."""
    returns, rows = [], []
    n = len(node.samples)
    for a, r in enumerate(node.rewards):
        child = node.children[a] if node.children else None
        own = [node.shaped_reward_of(a, i) for i in range(n)]
        if child is not None:
            child_returns = compute_returns(child, discount)
            r = r + discount * sum(child_returns) / len(child_returns)
            for i in range(n):
                later = [row[i] for row in child.agent_return_rows]
                own[i] = own[i] + discount * sum(later) / len(later)
        returns.append(r)
        rows.append(own)
    node.returns = returns
    node.agent_return_rows = rows
    return returns


def agent_returns(node: TreeNode, agent: int) -> list[float]:
    """Credit for each of ``agent``'s K completions at ``node``.

    Aligned: the agent's return of the action it belongs to (the joint return when rewards are
    shared, its own return when they are per agent). Cross: the mean of those returns over
    the actions that used that completion (the reference summed; the mean keeps the scale of a
    return when advantages are not normalized).
    """
    k = len(node.samples[agent].completion_ids)
    totals = [0.0] * k
    counts = [0] * k
    for a, action in enumerate(node.joint_actions):
        totals[action[agent]] += node.return_of(a, agent)
        counts[action[agent]] += 1
    return [t / c if c else 0.0 for t, c in zip(totals, counts)]
