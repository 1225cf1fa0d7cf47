"""The actor's loss aggregation (IPPO / MAPPO and the on-policy actor) against hand values:
what each row's advantage is divided by, and the gradient a mini-batch of two rows gets."""

from types import SimpleNamespace

import pytest
import torch

from comlrl.ac import IACConfig
from comlrl.ac.ppo import actor_loss, advantage_divisors
from comlrl.core.logprobs import TokenLogprobs

# two rows with 2 and 6 completion tokens
LENGTHS = [2, 6]
ADVS = [1.0, 1.0]


def _trainer(mode, distributed=False, pooled=None):
    return SimpleNamespace(
        args=SimpleNamespace(loss_aggregation=mode),
        dist=SimpleNamespace(is_distributed=distributed, world_size=2),
        sync=SimpleNamespace(pooled_total=pooled),
    )


def _batch():
    """Rows (group, completion index) of two one-completion groups."""
    return [(SimpleNamespace(completion_ids=[[5] * n], old_logps=[[0.0] * n]), 0) for n in LENGTHS]


@pytest.mark.parametrize(
    "mode, want",
    [
        ("sum", [2, 2]),  # 1.4.3: average over the mini-batch's completions
        ("sequence_mean", [2 * 2, 2 * 6]),
        ("token_mean", [8.0, 8.0]),
    ],
)
def test_divisors_by_hand(mode, want):
    assert advantage_divisors(_trainer(mode), _batch()) == want


def test_token_mean_pools_the_ranks_tokens():
    # the other rank holds 12 tokens: 20 in the step, 10 per rank's share
    trainer = _trainer("token_mean", distributed=True, pooled=lambda t: t + 12)
    assert advantage_divisors(trainer, _batch()) == [10.0, 10.0]


@pytest.mark.parametrize(
    "mode, want",
    [
        ("sum", [-1 / 2, -1 / 2]),  # every token of row r weighs A_r / batch
        ("sequence_mean", [-1 / 4, -1 / 12]),
        ("token_mean", [-1 / 8, -1 / 8]),
    ],
)
@pytest.mark.parametrize("policy_loss", ["reinforce", "ppo"])
def test_per_token_gradients(mode, want, policy_loss):
    mask = torch.zeros(2, 6)
    for r, n in enumerate(LENGTHS):
        mask[r, :n] = 1.0
    values = torch.zeros(2, 6, requires_grad=True)
    divisors = advantage_divisors(_trainer(mode), _batch())
    w = torch.tensor([a / d for a, d in zip(ADVS, divisors)])
    args = SimpleNamespace(
        policy_loss=policy_loss, epsilon=0.2, epsilon_high=None, loss_aggregation=mode
    )
    loss, _ = actor_loss(args, TokenLogprobs(values, mask), w, _batch())
    (grad,) = torch.autograd.grad(loss, values)
    assert grad[0, 0].item() == pytest.approx(want[0])
    assert grad[1, 0].item() == pytest.approx(want[1])


def test_the_field_is_checked():
    assert IACConfig().loss_aggregation == "sum"
    with pytest.raises(ValueError, match="loss_aggregation"):
        IACConfig(loss_aggregation="constant")


@pytest.mark.parametrize("make", ["iac_value_head", "maac"])
def test_ppo_trains_with_token_mean(tmp_path, make):
    from .helpers import make_iac, make_maac

    cfg = dict(policy_loss="ppo", loss_aggregation="token_mean")
    if make == "maac":
        trainer = make_maac(tmp_path, **cfg)
    else:
        trainer = make_iac(tmp_path, separate=False, **cfg)
    before = [p.detach().clone() for p in trainer.agents[0].parameters()]
    trainer.train()
    after = list(trainer.agents[0].parameters())
    assert any(not torch.equal(b, a) for b, a in zip(before, after))
