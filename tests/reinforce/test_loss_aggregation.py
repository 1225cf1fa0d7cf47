"""Loss aggregation: sum, sequence_mean, token_mean (DAPO) and constant (Dr. GRPO) row weights
against hand values, the earlier names as aliases, and the batch loss they give."""

import pytest
import torch

from comlrl.core.logprobs import TokenLogprobs
from comlrl.reinforce import MAGRPOConfig
from comlrl.reinforce.losses import reinforce_loss, row_weights

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


@pytest.mark.parametrize(
    "old, new", [("none", "sum"), ("token_mean", "sequence_mean"), ("constant", "constant")]
)
def test_earlier_names_are_aliases(old, new):
    assert MAGRPOConfig(loss_length_normalization=old).loss_aggregation == new


def test_none_is_an_alias_of_sum():
    assert MAGRPOConfig(loss_aggregation="none").loss_aggregation == "sum"


def test_conflicting_old_and_new_names_raise():
    with pytest.raises(ValueError, match="set only loss_aggregation"):
        MAGRPOConfig(loss_length_normalization="constant", loss_aggregation="sum")


def test_token_mean_loss_is_the_mean_over_every_token():
    values = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    adv = torch.tensor([2.0, -1.0])
    w = torch.tensor(row_weights([2, 3], [2, 2], 1, "token_mean", 8))
    loss, _ = reinforce_loss(TokenLogprobs(values, mask), None, adv, w, None)
    # -(2*(-1) + 2*(-2) + (-1)*(-0.5) + (-1)*(-0.5) + (-1)*(-1)) / 5 tokens
    assert loss.item() == pytest.approx(-(-2 - 4 + 0.5 + 0.5 + 1) / 5)
