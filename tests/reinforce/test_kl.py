"""KL to the reference in the REINFORCE family: placement checks, the KL-in-loss term and its
gradient against hand values, and KL shaping's carry of later turns' KL into earlier returns
through the tree's one return recursion."""

import math
from types import SimpleNamespace

import pytest
import torch

from comlrl.core.algos.losses import kl_penalty
from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.logprobs import TokenLogprobs
from comlrl.core.loop import ItemBatch
from comlrl.core.rewards.shaping import shape_with_kl
from comlrl.core.rollout.tree import TreeNode, agent_returns, compute_returns
from comlrl.core.testing import tiny_pair
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

from ..ac.helpers import transition
from .helpers import PROMPTS, length_reward, make_config, make_trainer


def test_kl_in_reward_and_loss_together_is_refused():
    with pytest.raises(ValueError, match="beta=0.1 puts a KL term in the loss"):
        MAGRPOConfig(reference_kl_enabled=True, beta=0.1)


def test_k1_in_the_loss_is_refused():
    with pytest.raises(ValueError, match="reference_kl_estimator='k1' with beta > 0"):
        MAGRPOConfig(beta=0.1, reference_kl_estimator="k1")


def test_unknown_estimator_is_refused_by_the_config():
    with pytest.raises(ValueError, match="reference_kl_estimator"):
        MAGRPOConfig(reference_kl_estimator="k5")


def test_beta_loads_references():
    assert MAGRPOConfig(beta=0.1)._uses_reference()
    assert not MAGRPOConfig()._uses_reference()


def _rows():
    values = torch.tensor([[-1.0, -2.0, 0.0]], dtype=torch.float32, requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    ref = torch.tensor([[-1.5, -1.0, 0.0]])
    return values, TokenLogprobs(values, mask), ref


@pytest.mark.parametrize(
    "estimator, value, grads",
    [
        # beta * w = 0.2 * 0.5 = 0.1; d = ref - logp = [-0.5, 1]
        ("k1", 0.1 * (0.5 - 1.0), [0.1, 0.1, 0.0]),
        ("k2", 0.1 * (0.125 + 0.5), [0.1 * 0.5, 0.1 * -1.0, 0.0]),
        (
            "k3",
            0.1 * (math.exp(-0.5) + 0.5 - 1.0 + math.e - 2.0),
            [0.1 * (1 - math.exp(-0.5)), 0.1 * (1 - math.e), 0.0],
        ),
    ],
)
def test_kl_loss_term_value_and_gradient(estimator, value, grads):
    values, lp, ref = _rows()
    term, metrics = kl_penalty(lp, ref, torch.tensor([0.5]), 0.2, estimator)
    assert term.item() == pytest.approx(value, rel=1e-6)
    term.backward()
    assert values.grad[0].tolist() == pytest.approx(grads, rel=1e-6, abs=1e-9)
    assert metrics["kl"] == pytest.approx(value / 0.1 / 2, rel=1e-6)  # mean over 2 tokens


def _node(turn, actions, children=None):
    node = TreeNode(0, {}, turn, ["p", "p"], ["p", "p"], [[], []], [[], []])
    node.joint_actions = actions
    node.children = children or []
    node.rewards = [0.0] * len(actions)
    node.samples = [SimpleNamespace(completion_ids=[[1], [2]]) for _ in range(2)]
    return node


def _carried(root, nodes, own, agent, discount):
    """KL-to-go of each of ``agent``'s completions: with zero rewards and coef 1, the shaped
    return is minus the carried KL."""
    zeros = [[0.0, 0.0] for _ in nodes]
    kls = [own, zeros] if agent == 0 else [zeros, own]
    shape_with_kl([root], nodes, kls, 1.0, discount)
    return [[-r for r in agent_returns(n, agent)] for n in nodes]


def test_carry_aligned_two_turns():
    c0 = _node(1, [(0, 0), (1, 1)])
    c1 = _node(1, [(0, 0), (1, 1)])
    root = _node(0, [(0, 0), (1, 1)], [c0, c1])
    nodes = [root, c0, c1]
    own = [[1.0, 2.0], [0.5, 1.5], [3.0, 5.0]]  # agent 0's KL of each completion
    got = _carried(root, nodes, own, agent=0, discount=0.5)
    # root: own + 0.5 * mean KL-to-go of the child its action led to (1.0 and 4.0)
    assert got == [[1.5, 4.0], [0.5, 1.5], [3.0, 5.0]]


def test_carry_cross_mode_credits_the_mean_over_actions():
    actions = [(0, 0), (0, 1), (1, 0), (1, 1)]
    kids = [_node(1, [(0, 0), (1, 1)]) for _ in actions]
    root = _node(0, actions, kids)
    nodes = [root, *kids]
    child_kl = [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]
    own = [[10.0, 20.0], *child_kl]
    got = _carried(root, nodes, own, agent=1, discount=1.0)
    # agent 1's completion 0 is in actions 0 and 2 (children KL 1 and 3), completion 1 in 1, 3
    assert got[0] == [10.0 + (1.0 + 3.0) / 2, 20.0 + (2.0 + 4.0) / 2]


def test_shaping_leaves_the_environment_returns():
    c0 = _node(1, [(0, 0), (1, 1)])
    root = _node(0, [(0, 0), (1, 1)], [c0, None])
    root.rewards = [1.0, 2.0]
    c0.rewards = [4.0, 6.0]
    compute_returns(root, 0.5)
    assert root.returns == [1.0 + 0.5 * 5.0, 2.0]
    shape_with_kl([root], [root, c0], [[[1.0, 1.0]] * 2, [[0.0, 0.0]] * 2], 2.0, 0.5)
    assert root.returns == [1.0 + 0.5 * 5.0, 2.0]  # the environment's, for the logs
    assert agent_returns(root, 0) == [-1.0 + 0.5 * 3.0, 0.0]  # each reward less 2 * KL 1
    assert agent_returns(root, 1) == root.returns


def _kl_trainer(tmp_path, name, kl: bool):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    return MAGRPOTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS[:1],
        reward_func=length_reward,
        external_transition=transition,
        args=make_config(
            output_dir=str(tmp_path / name),
            num_turns=2,
            reference_kl_enabled=kl,
            reference_kl_coef=0.5,
            advantage_mode="raw",
            advantage_normalization=False,
        ),
    )


def test_magrpo_carries_later_turns_kl_into_earlier_returns(tmp_path, monkeypatch):
    import comlrl.core.rewards.shaping as shaping

    monkeypatch.setattr(shaping, "sequence_kl", lambda pol, ref, p, c, pad, **_: [1.0] * len(p))
    unit = ItemBatch(0, 1, items=[PROMPTS[0]], offset=0)
    plain_trainer = _kl_trainer(tmp_path, "plain", kl=False)
    torch.manual_seed(0)
    plain = plain_trainer.collect(unit)
    shaped_trainer = _kl_trainer(tmp_path, "kl", kl=True)
    torch.manual_seed(0)
    shaped = shaped_trainer.collect(unit)
    gamma = shaped_trainer.args.discount
    for rec, ref in zip(shaped.entries, plain.entries):
        s, p = rec.samples[0][0], ref.samples[0][0]
        assert s.completion_ids == p.completion_ids  # KL draws nothing from the sampler
        carried = 1.0 + gamma * 1.0 if s.turn == 0 else 1.0  # own KL 1 + the next turn's
        assert s.kls == [1.0, 1.0]
        assert s.returns == pytest.approx([r - 0.5 * carried for r in p.returns])
        assert s.advantages == pytest.approx(s.returns)  # raw, not normalized
        assert s.node_return == pytest.approx(p.node_return)  # logged unshaped


def test_kl_in_the_loss_trains_and_logs(tmp_path):
    trainer = make_trainer(tmp_path, beta=0.05)
    assert len(trainer.reference_models) == 2
    trainer.train()
    recs = read_metrics(tmp_path / "run" / "metrics.jsonl")
    kls = [r["agent_0/kl"] for r in recs if "agent_0/kl" in r]
    # k3 is >= 0; the first step's policy is the reference, so its KL is ~0
    assert kls and all(math.isfinite(k) and k >= -1e-6 for k in kls)
    assert abs(kls[0]) < 1e-4
