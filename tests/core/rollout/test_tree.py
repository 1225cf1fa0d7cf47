"""Rollout tree shapes, env steps, returns and the external-transition contract (no models)."""

import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.core.rollout.formatters import build_formatters
from comlrl.core.rollout.generation import PromptSamples
from comlrl.core.rollout.tree import TreeSettings, agent_returns, build_trees


class FakeGenerator:
    """Returns deterministic texts and records every call."""

    def __init__(self, k):
        self.k = k
        self.calls = []

    def __call__(self, prompts_per_agent):
        self.calls.append([list(p) for p in prompts_per_agent])
        out = []
        for i, prompts in enumerate(prompts_per_agent):
            out.append(
                [
                    PromptSamples(
                        p,
                        [1],
                        [[2, j] for j in range(self.k)],
                        [f"a{i}-{j}-" + "x" * j for j in range(self.k)],
                    )
                    for p in prompts
                ]
            )
        return out


def reward_sum_lengths(completions, prompts, batch_items):
    return [float(sum(len(c[j]) for c in completions)) for j in range(len(prompts))]


def transition(
    *, prompt, agent_completions, num_agents, prompt_history_per_agent, response_history_per_agent
):
    return [f"{prompt} next" for _ in range(num_agents)]


def _run(n, k, t, mode, items=1, threshold=None, discount=1.0):
    gen = FakeGenerator(k)
    cfg = TreeSettings(
        num_agents=n,
        num_turns=t,
        num_samples=k,
        joint_mode=mode,
        early_termination_threshold=threshold,
        discount=discount,
    )
    roots = build_trees(
        [{"prompt": f"p{i}"} for i in range(items)],
        cfg,
        build_formatters(None, n),
        gen,
        reward_sum_lengths,
        transition,
    )
    return roots, gen


@pytest.mark.parametrize("t", [1, 2, 3])
@pytest.mark.parametrize("mode", ["aligned", "cross"])
def test_tree_sizes_and_env_step(t, mode):
    n, k = 2, 2
    roots, gen = _run(n, k, t, mode, items=2)
    actions = k if mode == "aligned" else k**n
    for root in roots:
        nodes = list(root.walk())
        assert len(nodes) == sum(actions ** (d) for d in range(t))
        for d in range(t):
            assert sum(1 for x in nodes if x.turn == d) == actions**d
        assert all(len(x.joint_actions) == actions for x in nodes)
    # one generate call per turn level, covering every node of both items
    assert len(gen.calls) == t
    per_item = sum(actions ** (d + 1) for d in range(t))
    steps = [x.step for r in roots for x in r.walk()]
    assert steps == sorted(steps)  # pre-order, items in order
    assert max(steps) == 2 * per_item


def test_returns_discounted_mean_of_children():
    roots, _ = _run(1, 2, 2, "aligned", discount=0.5)
    root = roots[0]
    for a, child in enumerate(root.children):
        assert root.returns[a] == pytest.approx(
            root.rewards[a] + 0.5 * sum(child.returns) / len(child.returns)
        )
    assert all(c.returns == c.rewards for c in root.children)


def test_cross_credit_is_mean_over_actions():
    roots, _ = _run(2, 2, 1, "cross")
    root = roots[0]
    credit = agent_returns(root, 0)
    for k in range(2):
        vals = [root.returns[a] for a, act in enumerate(root.joint_actions) if act[0] == k]
        assert credit[k] == pytest.approx(sum(vals) / len(vals))


def test_early_termination_stops_branch():
    roots, _ = _run(2, 2, 3, "aligned", threshold=0.0)
    assert all(len(list(r.walk())) == 1 for r in roots)
    assert roots[0].terminated


def test_external_transition_gets_exactly_documented_keywords():
    seen = []

    def spy(**kwargs):
        seen.append(kwargs)
        return ["n0", "n1"]

    cfg = TreeSettings(num_agents=2, num_turns=2, num_samples=2)
    build_trees(
        [{"prompt": "orig"}],
        cfg,
        build_formatters(None, 2),
        FakeGenerator(2),
        reward_sum_lengths,
        spy,
    )
    assert len(seen) == 2
    for kw in seen:
        assert set(kw) == {
            "prompt",
            "agent_completions",
            "num_agents",
            "prompt_history_per_agent",
            "response_history_per_agent",
        }
        assert kw["prompt"] == "orig"
        assert kw["num_agents"] == 2
        assert len(kw["agent_completions"]) == 2
        assert kw["prompt_history_per_agent"] == [["orig"], ["orig"]]
        assert [h[-1] for h in kw["response_history_per_agent"]] == kw["agent_completions"]


def test_bad_transition_output_is_an_error():
    cfg = TreeSettings(num_agents=2, num_turns=2, num_samples=2)
    with pytest.raises(ValueError, match="per-agent prompts"):
        build_trees(
            [{"prompt": "x"}],
            cfg,
            build_formatters(None, 2),
            FakeGenerator(2),
            reward_sum_lengths,
            lambda **kw: "not a list",
        )


def test_formatter_external_prompts_contract():
    got = []

    def fmt(item, external_prompts=None):
        got.append(external_prompts)
        return f"F[{external_prompts or item['prompt']}]"

    def plain(item):
        return f"P[{item['prompt']}|{item.get('_original_prompt')}]"

    cfg = TreeSettings(num_agents=2, num_turns=2, num_samples=1)
    gen = FakeGenerator(1)
    build_trees(
        [{"prompt": "orig"}],
        cfg,
        build_formatters([fmt, plain], 2),
        gen,
        reward_sum_lengths,
        lambda **kw: ["e0", "e1"],
    )
    assert gen.calls[1] == [["F[e0]"], ["P[e1|orig]"]]
    assert got == [None, "e0"]


def test_passthrough_uses_external_prompt_verbatim():
    cfg = TreeSettings(num_agents=2, num_turns=2, num_samples=1, external_prompt_passthrough=True)
    gen = FakeGenerator(1)
    build_trees(
        [{"prompt": "orig"}],
        cfg,
        build_formatters(lambda it: "FMT", 2),
        gen,
        reward_sum_lengths,
        lambda **kw: ["e0", "e1"],
    )
    assert gen.calls[1] == [["e0"], ["e1"]]


def test_transition_signature_documented():
    params = set(inspect.signature(transition).parameters)
    assert params == {
        "prompt",
        "agent_completions",
        "num_agents",
        "prompt_history_per_agent",
        "response_history_per_agent",
    }


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 3),
    k=st.integers(1, 3),
    t=st.integers(1, 3),
    mode=st.sampled_from(["aligned", "cross"]),
    items=st.integers(1, 3),
)
def test_tree_shape_property(n, k, t, mode, items):
    roots, gen = _run(n, k, t, mode, items=items)
    actions = k**n if (mode == "cross" and n > 1) else k
    total_nodes = sum(len(list(r.walk())) for r in roots)
    assert total_nodes == items * sum(actions**d for d in range(t))
    assert len(gen.calls) == t
    last = 0
    for r in roots:
        for node in r.walk():
            assert node.step == last + len(node.joint_actions)
            last = node.step
