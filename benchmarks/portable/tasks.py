"""The benchmark's task: a length-ratio reward and a feedback transition, for any agent count.

Written without any comlrl import so that the reference venv and ours call the same functions.
The reward follows comlrl.tasks.length_ratio: 1.0 when the second answer is 2-3x as long as the
first, decaying as exp(-distance) outside that window. With more than two agents every agent
is scored against the one before it (a chain of pairs) and the pair scores are averaged; with
two agents that is the single pair, so the two-agent workloads see exactly the original task.
"""

from __future__ import annotations

import math

TOPICS = [
    "a cat",
    "the sea",
    "a robot",
    "a garden",
    "winter",
    "a lost key",
    "a dragon",
    "the moon",
    "a bakery",
    "a long journey",
    "a river",
    "an old house",
]


def dataset(num_items: int) -> list[dict]:
    """``num_items`` story prompts in the style of the tiny models' corpus."""
    return [{"prompt": f"Write a story about {TOPICS[i % len(TOPICS)]}."} for i in range(num_items)]


def story_prompt(item: dict) -> str:
    """Both agents read the item's prompt as it is."""
    return str(item["prompt"])


def _ratio_score(first: str, second: str) -> float:
    if not first:
        return 0.0
    ratio = len(second) / len(first)
    if 2.0 <= ratio <= 3.0:
        return 1.0
    return math.exp(-(2.0 - ratio if ratio < 2.0 else ratio - 3.0))


def length_reward(*completions) -> list[float]:
    """One agent's reward in [0, 1]: its answer's length, capped at 200 characters (the
    one-agent cells of the benchmarks, where no ratio exists)."""
    return [min(len(c), 200) / 200 for c in completions[0]]


def reward_for(spec: dict):
    """The benchmarks' reward for the spec: the length ratio for two agents or more, the
    length alone for one."""
    return length_reward if spec.get("num_agents", 2) == 1 else length_ratio_reward


def length_ratio_reward(*completions) -> list[float]:
    """One joint reward in [0, 1] per joint action, from one list of answers per agent.

    Two agents: the ratio score of each (first, second) pair. N agents: the mean of the N - 1
    scores of consecutive agents (agent i against agent i - 1) in each joint action.
    """
    if len(completions) < 2:
        raise ValueError(
            f"length_ratio_reward needs the answers of at least 2 agents, got {len(completions)}"
        )
    pairs = len(completions) - 1
    return [
        sum(_ratio_score(joint[i], joint[i + 1]) for i in range(pairs)) / pairs
        for joint in zip(*completions)
    ]


def feedback_transition(
    *,
    prompt: str,
    agent_completions,
    num_agents: int,
    prompt_history_per_agent=None,
    response_history_per_agent=None,
):
    """Next-turn prompts: each agent hears how long the previous answers were.

    The first agent hears its own length; every later agent i hears agent i - 1's length and its
    own, with a hint towards the 2-3x window. One prompt per agent (``num_agents`` of them).
    """
    lengths = [len(text) for text in agent_completions[:num_agents]]
    if len(lengths) < num_agents:
        raise ValueError(
            f"feedback_transition got {len(lengths)} completions for num_agents={num_agents}"
        )
    prompts = [f"{prompt} Your previous answer was {lengths[0]} characters. Write it again."]
    for before, own in zip(lengths, lengths[1:]):
        ratio = own / max(1, before)
        hint = "longer" if ratio < 2.0 else ("shorter" if ratio > 3.0 else "the same")
        prompts.append(
            f"{prompt} The other answer was {before} characters and yours {own}. "
            f"Write it again, {hint}."
        )
    return prompts[:num_agents]


# Above any reachable mean reward, so every tree grows to num_turns on both sides.
NO_EARLY_STOP = 10.0
