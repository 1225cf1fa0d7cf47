"""``dropout_off``: no dropout inside the scope, training mode untouched, rates restored."""

import pytest
import torch

from comlrl.core.testing import tiny_pair
from comlrl.core.training.dropout import dropout_off


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.parametrize("arch", ["gpt2", "qwen2"])
def test_a_model_in_train_mode_scores_as_in_eval_mode_inside_the_scope(arch):
    model, _ = tiny_pair(arch=arch)
    if arch == "qwen2":  # its attention reads a float rate at forward time
        model.config.attention_dropout = 0.3
        for layer in model.model.layers:
            layer.self_attn.attention_dropout = 0.3
    ids = torch.tensor([[5, 9, 17, 33, 7, 8, 10, 11]])
    want = _logits(model.eval(), ids)
    model.train()
    torch.manual_seed(0)
    assert not torch.allclose(_logits(model, ids), want, atol=1e-3)  # dropout acts
    with dropout_off(model):
        assert model.training
        torch.testing.assert_close(_logits(model, ids), want, rtol=1e-5, atol=1e-5)
    assert model.training
    torch.manual_seed(0)
    assert not torch.allclose(_logits(model, ids), want, atol=1e-3)  # and acts again after


def test_the_rates_come_back_after_an_error():
    model, _ = tiny_pair(arch="gpt2")
    rates = [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert rates and all(p == 0.1 for p in rates)
    with pytest.raises(RuntimeError, match="inside"):
        with dropout_off(model):
            assert all(m.p == 0.0 for m in model.modules() if isinstance(m, torch.nn.Dropout))
            raise RuntimeError("inside")
    assert [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)] == rates


def test_rates_are_read_on_every_entry():
    """The modules holding rates are found once per model; the rates themselves are read on
    every entry, so a rate changed between two scopes is switched off and restored as it is."""
    model, _ = tiny_pair(arch="gpt2")
    drops = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    with dropout_off(model):
        assert all(m.p == 0.0 for m in drops)
    drops[0].p = 0.4
    with dropout_off(model):
        assert all(m.p == 0.0 for m in drops)
    assert drops[0].p == 0.4 and all(m.p == 0.1 for m in drops[1:])
