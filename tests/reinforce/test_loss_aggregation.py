"""Loss aggregation: sum, sequence_mean, token_mean (DAPO) and constant (Dr. GRPO) row weights
against hand values, the earlier names as aliases, the batch loss they give, and DAPO's token
mean kept global when several ranks share a mini-batch."""

from types import SimpleNamespace

import pytest
import torch

from comlrl.core.algos.losses import reinforce_loss
from comlrl.core.logprobs import TokenLogprobs
from comlrl.reinforce import MAGRPOConfig
from comlrl.reinforce.algos import row_weights, token_mean_total

from .helpers import make_trainer

# two groups of K=2 (lengths 4, 2 and 6, 1): 13 tokens in all; max_new_tokens 8
LENGTHS = [4, 2, 6, 1]
SIZES = [2, 2, 2, 2]


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("sum", [1 / 4] * 4),  # 1 / (K * groups)
        ("sequence_mean", [1 / 16, 1 / 8, 1 / 24, 1 / 4]),
        ("token_mean", [1 / 13] * 4),
        ("constant", [1 / 32] * 4),
    ],
)
def test_row_weights(mode, expected):
    assert row_weights(LENGTHS, SIZES, 2, mode, 8) == pytest.approx(expected)


def test_token_mean_leaves_masked_rows_out_of_the_total():
    got = row_weights(LENGTHS, SIZES, 2, "token_mean", 8, keep=[True, True, False, True])
    assert got == pytest.approx([1 / 7, 1 / 7, 0.0, 1 / 7])
    got = row_weights(LENGTHS, SIZES, 2, "sum", 8, keep=[False, True, True, True])
    assert got == pytest.approx([0.0, 1 / 4, 1 / 4, 1 / 4])


def test_none_is_an_alias_of_sum():
    assert MAGRPOConfig(loss_aggregation="none").loss_aggregation == "sum"


def test_token_mean_loss_is_the_mean_over_every_token():
    values = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    adv = torch.tensor([2.0, -1.0])
    w = torch.tensor(row_weights([2, 3], [2, 2], 1, "token_mean", 8))
    loss, _ = reinforce_loss(TokenLogprobs(values, mask), None, adv, w, None)
    # -(2*(-1) + 2*(-2) + (-1)*(-0.5) + (-1)*(-0.5) + (-1)*(-1)) / 5 tokens
    assert loss.item() == pytest.approx(-(-2 - 4 + 0.5 + 0.5 + 1) / 5)


# Two ranks of one mini-batch: rank A holds rows of 4 and 2 tokens, rank B rows of 6 and 4.
RANK_A, RANK_B = [4, 2], [6, 4]


def _step_weight_per_token(lengths, token_total):
    # the step averages the ranks' gradients: each rank's weights count 1/2
    (w, *_) = row_weights(lengths, [2, 2], 1, "token_mean", 64, token_total=token_total)
    return w / 2


def test_token_mean_is_global_over_ranks():
    pooled = sum(RANK_A) + sum(RANK_B)  # 16 tokens in the step
    divisor = token_mean_total(pooled, 2)
    assert divisor == 8.0
    for lengths in (RANK_A, RANK_B):
        assert _step_weight_per_token(lengths, divisor) == pytest.approx(1 / 16)
    # each rank's own count would weigh rank A's tokens 1/12 and rank B's 1/20
    assert _step_weight_per_token(RANK_A, None) == pytest.approx(1 / 12)
    assert _step_weight_per_token(RANK_B, None) == pytest.approx(1 / 20)


def test_the_trainer_pools_the_token_count_across_ranks(tmp_path):
    trainer = make_trainer(tmp_path, loss_aggregation="token_mean")
    assert trainer._token_total(RANK_A, None) is None  # one process: the mini-batch's count
    trainer.dist = SimpleNamespace(is_distributed=True, world_size=2)
    trainer.sync.pooled_total = lambda tokens: tokens + sum(RANK_B)  # the other rank's share
    assert trainer._token_total(RANK_A, [True, True]) == 8.0
    # masked rows' tokens are not counted
    assert trainer._token_total(RANK_A, [True, False]) == (4 + 10) / 2
