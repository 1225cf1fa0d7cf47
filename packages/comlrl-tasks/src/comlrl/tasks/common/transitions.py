"""Multi-turn external transitions: the contract and a generic critique-and-revise one."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from comlrl.tasks.common.lookup import ItemIndex

# build(item, agent_completions, prompt_history, response_history) -> one prompt per agent
PromptBuilder = Callable[[dict, list[str], list[list[str]], list[list[str]]], list[str]]


def make_transition(build: PromptBuilder, *, index: ItemIndex, num_agents: int, name: str):
    """An ``external_transition`` that finds the row and lets ``build`` write the next prompts.

    Signature: ``transition(*, prompt, agent_completions, num_agents,
    prompt_history_per_agent=None, response_history_per_agent=None, batch_item=None)``. When the
    trainer passes ``batch_item`` (the row of this rollout) it is used; otherwise the row is
    looked up by ``prompt``. Returns a list with one next-turn prompt per agent.
    """

    def transition(
        *,
        prompt: str | None = None,
        agent_completions: Sequence[str],
        num_agents: int = num_agents,
        prompt_history_per_agent: Sequence[Sequence[str]] | None = None,
        response_history_per_agent: Sequence[Sequence[str]] | None = None,
        batch_item: dict | None = None,
    ) -> list[str]:
        expected = transition.num_agents
        if num_agents != expected or len(agent_completions) != expected:
            raise ValueError(
                f"{name} transition is built for {expected} agents; got num_agents="
                f"{num_agents} and {len(agent_completions)} agent_completions."
            )
        item = batch_item if batch_item is not None else index.find(prompt)
        if item is None:
            raise ValueError(
                f"{name} transition: no dataset row matches prompt {str(prompt)[:80]!r}; "
                "pass batch_item=<row>."
            )
        prompts_hist = [
            list(h) for h in (prompt_history_per_agent or [[] for _ in range(expected)])
        ]
        responses_hist = [
            list(h) for h in (response_history_per_agent or [[] for _ in range(expected)])
        ]
        out = build(item, [str(c) for c in agent_completions], prompts_hist, responses_hist)
        if len(out) != expected or not all(isinstance(p, str) and p for p in out):
            raise ValueError(f"{name} transition must produce {expected} non-empty prompts.")
        return out

    transition.num_agents = num_agents
    transition.__name__ = transition.__qualname__ = f"{name}_transition"
    return transition


def critique_prompt(instruction: str, previous: str, notes: Sequence[str] = ()) -> str:
    """The next-turn text of the generic critique-and-revise loop for one agent."""
    parts = [instruction.rstrip(), "", "Your previous answer was:", previous.strip() or "(empty)"]
    if notes:
        parts += ["", "Notes from the checker:"] + [f"- {note}" for note in notes]
    parts += [
        "",
        "Check that answer against the task above: find what is wrong, missing or "
        "unclear. Then give an improved answer. Output only the revised answer, with no "
        "commentary about the changes.",
    ]
    return "\n".join(parts)


def make_critique_transition(
    renders: Sequence[Callable[[dict], str]],
    *,
    index: ItemIndex,
    notes: Callable[[dict, list[str]], list[list[str]]] | None = None,
    name: str,
):
    """A generic "critique and revise" transition for any task.

    Each agent gets its original instruction, its own previous answer, optional per-agent notes
    from ``notes(item, agent_completions)`` (for example which reward levels failed), and a
    request to review and rewrite.
    """
    count = len(renders)

    def build(item, completions, _prompt_history, _response_history):
        extra = notes(item, completions) if notes is not None else [[] for _ in range(count)]
        return [critique_prompt(renders[a](item), completions[a], extra[a]) for a in range(count)]

    return make_transition(build, index=index, num_agents=count, name=name)
