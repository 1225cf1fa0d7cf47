"""Per-agent rewards in the actor-critic family: rewards, TD targets and the centralized critic's
targets are each agent's own; the 1.4.3 one-value-per-agent reward works again."""

import pytest

from comlrl.ac.maac import joint_text
from comlrl.core.logging.jsonl import read_metrics

from .helpers import make_iac, make_maac


def agent0_only(a, b):
    """Agent 0 is rewarded for its own length; agent 1 always gets 0."""
    return [[len(x) / 10.0, 0.0] for x in a]


def reference_style(completions_0, completions_1):
    """CoMLRL 1.4.3 actor-critic style: one value per agent for the call's joint action."""
    return [len(completions_0[0]) / 10.0, 0.0]


class Spy:
    """A metrics_callback that keeps every sample it sees."""

    def __init__(self):
        self.samples = []

    def __call__(self, samples):
        self.samples.extend(samples)
        return {}


@pytest.mark.parametrize("make", [make_iac, make_maac], ids=["iac", "maac"])
def test_each_agents_targets_come_from_its_own_reward(tmp_path, make):
    spy = Spy()
    trainer = make(tmp_path, reward=agent0_only)
    trainer.metrics_callback = spy
    trainer.train()
    by_agent = {0: [], 1: []}
    for s in spy.samples:
        by_agent[s.agent_idx].append(s)
    assert by_agent[0] and by_agent[1]
    for s in by_agent[1]:
        assert s.reward == 0.0 and s.value_target == 0.0
    for s in by_agent[0]:
        assert s.reward == pytest.approx(len(s.completion) / 10.0)
        assert s.value_target == pytest.approx(s.reward)  # single turn: the target is r
        assert s.advantage == pytest.approx(s.value_target - s.old_value)
        assert s.metadata["joint_reward"] == pytest.approx(s.reward / 2)
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    logged = [r for r in records if "turn_1/agent_0_reward_mean" in r]
    assert logged
    for r in logged:
        assert r["turn_1/agent_1_reward_mean"] == 0.0
        assert r["turn_1/reward_mean"] == pytest.approx(r["turn_1/agent_0_reward_mean"] / 2)


def test_reference_style_per_agent_list_trains_iac(tmp_path):
    spy = Spy()
    trainer = make_iac(tmp_path, reward=reference_style)
    trainer.metrics_callback = spy
    with pytest.warns(UserWarning, match="one per agent"):
        trainer.train()
    assert trainer.reward_caller.call_mode == "per_sample"
    assert {s.reward for s in spy.samples if s.agent_idx == 1} == {0.0}
    for s in spy.samples:
        if s.agent_idx == 0:
            assert s.reward == pytest.approx(len(s.completion) / 10.0)


def test_maac_critic_is_asked_for_each_agents_own_value(tmp_path):
    trainer = make_maac(tmp_path, reward=agent0_only)
    asked = []
    original = trainer.joint_ids

    def spy(prompts, completions=None, agent=None):
        asked.append(agent)
        return original(prompts, completions, agent)

    trainer.joint_ids = spy
    joint = []
    make_joint = trainer._joint_samples

    def keep(nodes, *args):
        out = make_joint(nodes, *args)
        joint.append((sum(len(n.joint_actions) for n in nodes), out))
        return out

    trainer._joint_samples = keep
    trainer.train()
    assert set(asked) == {0, 1}
    assert joint
    for actions, per_node in joint:
        flat = [s for node in per_node for s in node]
        assert len(flat) == 2 * actions  # one joint sample per agent and joint action
        assert all(s.target == 0.0 for s in flat[1::2])  # agent 1's own target
        assert any(s.target != 0.0 for s in flat[0::2])
    assert joint_text(["a", "b"], agent=1).endswith("\n\n[Value of Agent 1]")
    assert "[Value of" not in joint_text(["a", "b"])


def test_maac_shared_reward_keeps_one_joint_value(tmp_path):
    trainer = make_maac(tmp_path)
    asked = []
    original = trainer.joint_ids

    def spy(prompts, completions=None, agent=None):
        asked.append(agent)
        return original(prompts, completions, agent)

    trainer.joint_ids = spy
    trainer.train()
    assert asked and set(asked) == {None}


def test_multi_turn_returns_and_targets_use_each_agents_own_rewards(tmp_path):
    spy = Spy()
    trainer = make_iac(tmp_path, reward=agent0_only, num_turns=2, num_generations=1)
    trainer.metrics_callback = spy
    trainer.train()
    agent1 = [s for s in spy.samples if s.agent_idx == 1]
    agent0 = [s for s in spy.samples if s.agent_idx == 0]
    assert {s.turn_idx for s in agent1} == {0, 1}
    assert all(s.reward == 0.0 and s.returns == 0.0 for s in agent1)
    last = [s for s in agent0 if s.turn_idx == 1]
    first = [s for s in agent0 if s.turn_idx == 0]
    assert all(s.value_target == pytest.approx(s.reward) for s in last)
    # the first turn's reward-to-go adds the agent's own reward of the next turn
    assert sum(s.returns for s in first) == pytest.approx(
        sum(s.reward for s in first) + sum(s.reward for s in last)
    )
