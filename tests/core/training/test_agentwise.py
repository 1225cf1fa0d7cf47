"""The agent-by-agent backward of a joint loss: same gradients, one agent's graph at a time."""

import weakref

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from comlrl.core.training.train_step import agentwise_loss


def _agents(n: int, seed: int = 0) -> list[nn.Module]:
    torch.manual_seed(seed)
    return [
        nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Dropout(0.5), nn.Linear(32, 1))
        for _ in range(n)
    ]


def _joint(values: list[torch.Tensor]) -> torch.Tensor:
    return -F.logsigmoid(torch.stack(values).sum(0)).mean()


def _grads(models):
    return [torch.cat([p.grad.flatten() for p in m.parameters()]) for m in models]


def _scorer(model, x):
    return lambda grad: model(x).squeeze(-1)


@pytest.mark.parametrize("n", [2, 3])
def test_gradients_equal_the_joint_backward_with_dropout_on(n):
    x = torch.randn(8, 6)
    joint, split = _agents(n), _agents(n)
    torch.manual_seed(1)
    _joint([m(x).squeeze(-1) for m in joint]).backward()
    after_joint = torch.rand(1)
    torch.manual_seed(1)
    loss = agentwise_loss([_scorer(m, x) for m in split], _joint)
    loss.backward(torch.enable_grad)
    after_split = torch.rand(1)
    for a, b in zip(_grads(joint), _grads(split)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # The same dropout draws were used, and the generator ends where the joint step left it.
    assert torch.equal(after_joint, after_split)


def _peak_saved_bytes(step) -> int:
    """The most bytes autograd holds for backward at any moment during ``step()``."""
    live = [0, 0]

    class Saved:
        def __init__(self, t):
            self.t = t
            size = t.numel() * t.element_size()
            live[0] += size
            live[1] = max(live[1], live[0])
            weakref.finalize(self, lambda: live.__setitem__(0, live[0] - size))

    with torch.autograd.graph.saved_tensors_hooks(Saved, lambda s: s.t):
        step()
    return live[1]


def test_one_agents_graph_is_alive_at_a_time():
    x = torch.randn(64, 6)
    models = _agents(4)

    def joint():
        _joint([m(x).squeeze(-1) for m in models]).backward()

    def split():
        agentwise_loss([_scorer(m, x) for m in models], _joint).backward(torch.enable_grad)

    one_agent = _peak_saved_bytes(lambda: _joint([models[0](x).squeeze(-1)]).backward())
    assert _peak_saved_bytes(joint) > 3.5 * one_agent
    assert _peak_saved_bytes(split) < 1.3 * one_agent


def test_an_agent_without_a_gradient_is_not_scored_again():
    x = torch.randn(4, 6)
    models = _agents(2)
    calls = []

    def scorer(i):
        def score(grad):
            calls.append((i, grad))
            return models[i](x).squeeze(-1)

        return score

    # The loss reads agent 0 only, so agent 1's scores get no gradient.
    loss = agentwise_loss([scorer(0), scorer(1)], lambda v: v[0].sum())
    loss.backward(torch.enable_grad)
    assert calls == [(0, False), (1, False), (0, True)]
    assert all(p.grad is None for p in models[1].parameters())
