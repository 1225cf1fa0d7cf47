"""comlrl.ac.critic_models: critics without LM heads, and one forward for log-probs plus values."""

import pytest
import torch

from comlrl.ac.critic_models import (
    ValueHead,
    ValueModel,
    build_value_head,
    load_value_model,
    load_value_models,
    save_value_model,
)
from comlrl.core.logprobs import completion_logprobs
from comlrl.core.logprobs.values import last_token_values, logprobs_and_values
from comlrl.core.models.backbone import backbone_of
from comlrl.core.testing import tiny_pair

PROMPTS = [[5, 6, 7, 8], [9, 10]]
COMPLETIONS = [[11, 12, 0], [13]]


@pytest.mark.parametrize("arch", ["qwen2", "llama", "gpt2"])
def test_one_forward_gives_logprobs_and_the_separate_values(arch):
    model, tok = tiny_pair(arch=arch)
    torch.manual_seed(0)
    head = ValueHead(model.config.hidden_size if arch != "gpt2" else model.config.n_embd, 8)
    pad = tok.pad_token_id
    with torch.no_grad():
        lp, v_prompt = logprobs_and_values(model, head, PROMPTS, COMPLETIONS, pad, "prompt_end")
        _, q = logprobs_and_values(model, head, PROMPTS, COMPLETIONS, pad, "sequence_end")
        ref = completion_logprobs(model, PROMPTS, COMPLETIONS, pad)
        body = backbone_of(model)
        v_alone = last_token_values(body, head, PROMPTS, pad)
        q_alone = last_token_values(body, head, [p + c for p, c in zip(PROMPTS, COMPLETIONS)], pad)
    assert torch.allclose(lp.values * lp.mask, ref.values * ref.mask, atol=1e-5)
    assert torch.allclose(v_prompt, v_alone, atol=1e-5)
    assert torch.allclose(q, q_alone, atol=1e-5)
    assert not torch.allclose(v_prompt, q)


def test_gradients_reach_body_and_head():
    model, tok = tiny_pair()
    head = ValueHead(model.config.hidden_size)
    lp, values = logprobs_and_values(model, head, PROMPTS, COMPLETIONS, tok.pad_token_id)
    (lp.sequence_sum().sum() + values.sum()).backward()
    assert head.net.weight.grad is not None and head.net.weight.grad.abs().sum() > 0
    assert model.model.layers[0].mlp.up_proj.weight.grad.abs().sum() > 0


def test_critic_never_runs_an_lm_head(tmp_path):
    model, tok = tiny_pair()
    calls = []
    model.lm_head.register_forward_hook(lambda *a: calls.append(1))
    critic = load_value_model(model, hidden_dim=4)
    assert critic.backbone is model.model and critic.value_head.hidden_dim == 4
    values = critic.last_token_values(PROMPTS, tok.pad_token_id)
    assert values.shape == (2,) and values.dtype == torch.float32
    assert calls == []
    # from a saved causal LM: AutoModel loads only the body
    model.save_pretrained(tmp_path / "lm")
    loaded = load_value_model(str(tmp_path / "lm"))
    assert type(loaded.backbone).__name__ == "Qwen2Model"
    assert not hasattr(loaded.backbone, "lm_head")


def test_save_and_load_round_trip(tmp_path):
    model, tok = tiny_pair()
    critic = load_value_model(model, hidden_dim=6)
    save_value_model(critic, tmp_path / "c")
    again = load_value_model(str(tmp_path / "c"))
    assert again.value_head.hidden_dim == 6
    for (k, a), (_, b) in zip(critic.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), k
    with pytest.raises(ValueError, match="hidden dim"):
        load_value_model(str(tmp_path / "c"), hidden_dim=3)


def test_repeated_names_are_independent_and_repeated_objects_shared(tmp_path):
    model, _ = tiny_pair()
    model.save_pretrained(tmp_path / "lm")
    a, b = load_value_models([str(tmp_path / "lm")] * 2)
    assert a is not b and a.backbone is not b.backbone
    shared = load_value_models([model, model])
    assert shared[0] is shared[1]
    given = ValueModel(model.model, ValueHead(64))
    assert load_value_models([given]) == [given]


def test_value_head_init_and_shapes():
    head = build_value_head(tiny_pair()[0], None)
    assert head.hidden_dim is None
    assert float(head.net.bias.detach().abs().sum()) == 0.0
    assert head(torch.zeros(3, 5, 64)).shape == (3, 5)
    with pytest.raises(ValueError, match="value_at"):
        logprobs_and_values(tiny_pair()[0], head, PROMPTS, COMPLETIONS, 0, "middle")
    with pytest.raises(ValueError, match="critic"):
        load_value_model(42)
