"""Per-agent rewards in the REINFORCE family: each agent's credit comes from its own reward."""

import pytest
import torch

from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.loop import ItemBatch
from comlrl.core.rollout import rollouts
from comlrl.core.rollout.record import rollout_groups
from comlrl.core.testing import tiny_pair
from comlrl.reinforce import CentralizedMAGRPOTrainer

from .helpers import PROMPTS, make_trainer
from .test_centralized_magrpo import HalfAdapter, _config


def _snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _moved(model, snap) -> bool:
    return any(not torch.equal(p.detach(), snap[n]) for n, p in model.named_parameters())


def agent0_only(a, b):
    """Agent 0 is rewarded for its own length; agent 1 always gets 0."""
    return [[len(x) / 10.0, 0.0] for x in a]


@pytest.mark.parametrize("mode", ["mean", "rloo", "max", "raw"])
def test_a_reward_for_agent_0_only_moves_only_agent_0(tmp_path, mode):
    trainer = make_trainer(tmp_path, reward=agent0_only, advantage_mode=mode, weight_decay=0.0)
    before = [_snapshot(m) for m in trainer.agents]
    trainer.train()
    assert _moved(trainer.agents[0], before[0])
    assert not _moved(trainer.agents[1], before[1])
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    logged = [r for r in records if "turn_1/agent_0_reward_mean" in r]
    assert logged
    for r in logged:
        assert r["turn_1/agent_1_reward_mean"] == 0.0
        assert r["turn_1/reward_mean"] == pytest.approx(r["turn_1/agent_0_reward_mean"] / 2)


def test_per_agent_advantages_use_each_agents_own_returns(tmp_path):
    trainer = make_trainer(tmp_path, reward=agent0_only)
    _, nodes = rollouts.unit_trees(trainer, ItemBatch(0, 2, PROMPTS[:2], 0))
    node = nodes[0]
    assert node.per_agent
    sample0 = rollout_groups([node], 0)[0]
    sample1 = rollout_groups([node], 1)[0]
    assert sample0.returns == [len(t) / 10.0 for t in node.samples[0].texts]
    assert sample1.returns == [0.0, 0.0]
    adv1 = trainer.advantages_for([sample1])[0]
    assert torch.equal(adv1, torch.zeros_like(adv1))
    adv0 = trainer.advantages_for([sample0])[0]
    if len(set(sample0.returns)) > 1:
        assert bool(adv0.abs().sum() > 0)


def test_rows_of_equal_values_train_exactly_like_the_shared_value(tmp_path):
    def shared(a, b):
        return [float(len(y) - len(x)) / 10.0 for x, y in zip(a, b)]

    def rows(a, b):
        return [[v, v] for v in shared(a, b)]

    weights = []
    for name, reward in (("shared", shared), ("rows", rows)):
        trainer = make_trainer(tmp_path / name, reward=reward)
        trainer.train()
        weights.append([_snapshot(m) for m in trainer.agents])
    for agent in range(2):
        for key, value in weights[0][agent].items():
            assert torch.equal(value, weights[1][agent][key]), (agent, key)


def test_centralized_actor_is_credited_with_the_roles_mean(tmp_path):
    def per_role(c1, c2):
        return [[len(x) / 10.0, 0.0] for x in c1]

    def mean_of_roles(c1, c2):
        return [len(x) / 20.0 for x in c1]

    weights = []
    for name, reward in (("rows", per_role), ("mean", mean_of_roles)):
        model, tok = tiny_pair(seed=0)
        trainer = CentralizedMAGRPOTrainer(
            agent_model=model,
            tokenizer=tok,
            train_dataset=PROMPTS[:2],
            reward_func=reward,
            args=_config(num_agents=2, output_dir=str(tmp_path / name)),
            centralized_adapter=HalfAdapter(),
        )
        trainer.train()
        weights.append(_snapshot(trainer.agents[0]))
        records = read_metrics(tmp_path / name / "metrics.jsonl")
        roles = [r for r in records if "centralized/role_0_reward_mean" in r]
        if name == "rows":
            assert roles and all(r["centralized/role_1_reward_mean"] == 0.0 for r in roles)
        else:
            assert not roles
    for key, value in weights[0].items():
        assert torch.allclose(value, weights[1][key], atol=1e-6), key
