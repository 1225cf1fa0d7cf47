"""The reward model's pooling: the last real token (CoMLRL's) or the mean over real tokens."""

import pytest
import torch

from comlrl.core.models.backbone import backbone_of
from comlrl.core.testing import tiny_pair
from comlrl.pbrl import JointRewardModel, MARLHFConfig
from comlrl.pbrl.reward_model import encode_texts, score_texts


def test_mean_pooling_scores_the_mean_hidden_state_of_real_tokens():
    model, tok = tiny_pair()
    rm = JointRewardModel.from_source(model, seed=0, pooling="mean")
    texts = ["short", "a much longer text than the other one"]
    ids, mask = encode_texts(tok, texts, None, rm.device)
    with torch.no_grad():
        hidden = backbone_of(rm.backbone)(input_ids=ids[:1, : int(mask[0].sum())]).last_hidden_state
        expected = rm.score_head(hidden.mean(1)).squeeze(-1)
    together = score_texts(rm, tok, texts, None)
    assert together[0] == pytest.approx(float(expected[0]), abs=1e-5)  # pads never count
    last = JointRewardModel.from_source(model, seed=0)
    assert score_texts(last, tok, texts, None)[1] != pytest.approx(together[1], abs=1e-6)


def test_pooling_is_checked_by_name():
    model, _ = tiny_pair()
    with pytest.raises(ValueError, match="pooling"):
        JointRewardModel.from_source(model, seed=0, pooling="max")
    with pytest.raises(ValueError, match="reward_pooling"):
        MARLHFConfig(reward_pooling="max")
    assert MARLHFConfig().reward_pooling == "last"
