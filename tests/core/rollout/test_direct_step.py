"""The direct decode step returns ``model.forward``'s logits exactly, so decoding with it samples
the same tokens; models it does not mirror, or whose logits differ, decode through forward."""

import warnings

import pytest
import torch

from comlrl.core.rollout import direct_step, static_decode
from comlrl.core.rollout.decoding import decode_compacting
from comlrl.core.rollout.direct_step import direct_step_blocker, verified
from comlrl.core.rollout.generation import SamplingParams, left_pad, tokenize_prompts
from comlrl.core.rollout.static_decode import choose_decoder
from comlrl.core.testing import build_tokenizer, prompts, tiny_pair


def _qwen3(tok):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=256,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        attn_implementation="sdpa",
    )
    return Qwen3ForCausalLM(config).eval()


@pytest.fixture(autouse=True)
def fresh_verdicts():
    """Each test probes for itself: a verdict is shared by models of one configuration."""
    direct_step._verdicts.clear()
    yield
    direct_step._verdicts.clear()


@pytest.fixture(scope="module", params=["qwen2", "llama", "qwen3"])
def model_tok(request):
    if request.param == "qwen3":
        tok = build_tokenizer()
        return _qwen3(tok), tok
    model, tok = tiny_pair(arch=request.param, pretrain_steps=40)
    return model.eval(), tok


def _decode(model, tok, params, n, copies, seed, direct, same_length=False):
    texts = prompts(n)
    if same_length:
        texts = [texts[0]] * n  # no padding: the unmasked attention branch
    ids, mask = left_pad(tokenize_prompts(tok, texts), tok.pad_token_id)
    gen = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        kwargs = params.generate_kwargs()
        eos = {tok.eos_token_id}
        return decode_compacting(
            model, ids, mask, kwargs, eos, tok.pad_token_id, copies, gen, direct=direct
        )


@pytest.mark.parametrize(
    "params, copies",
    [
        (SamplingParams(max_new_tokens=24, do_sample=False), 1),
        (SamplingParams(max_new_tokens=24), 4),
        (SamplingParams(max_new_tokens=24, temperature=1.0, top_p=1.0, top_k=None), 3),
        (SamplingParams(max_new_tokens=24, extra={"min_new_tokens": 24}), 2),
    ],
    ids=["greedy", "warped", "plain", "min_new_tokens"],
)
@pytest.mark.parametrize("same_length", [False, True], ids=["padded", "unpadded"])
def test_direct_step_decodes_what_forward_decodes(model_tok, params, copies, same_length):
    model, tok = model_tok
    assert direct_step_blocker(model) is None and verified(model)
    for seed in (1, 2):
        through_forward = _decode(model, tok, params, 6, copies, seed, False, same_length)
        direct = _decode(model, tok, params, 6, copies, seed, True, same_length)
        assert direct == through_forward
    lengths = {len(r) for r in through_forward}
    pretrained = model.config.model_type != "qwen3"  # random weights rarely sample EOS
    if pretrained and params.do_sample and "min_new_tokens" not in params.extra:
        assert len(lengths) > 1  # rows finished at different steps: row drops were exercised


def test_logits_equal_forward_step_by_step(model_tok):
    model, tok = model_tok
    assert direct_step._probe(model)


def test_gpt2_is_not_mirrored_and_decodes_through_forward():
    model, _ = tiny_pair(arch="gpt2")
    kwargs = SamplingParams(max_new_tokens=4).generate_kwargs()
    assert "gpt2" in direct_step_blocker(model)
    assert not verified(model)
    assert choose_decoder(model, kwargs, "auto") == "compacting"
    static_decode._warned.clear()
    with pytest.warns(UserWarning, match="decode_fast_path='direct': model type 'gpt2'"):
        assert choose_decoder(model, kwargs, "direct") == "compacting"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per model class and reason
        assert choose_decoder(model, kwargs, "direct") == "compacting"


def test_differing_logits_fail_the_probe(monkeypatch):
    model, _ = tiny_pair()
    real = direct_step.DirectSteps.__call__

    def off_by_rounding(self, tokens, positions):
        return real(self, tokens, positions) * (1 + 1e-6)

    monkeypatch.setattr(direct_step.DirectSteps, "__call__", off_by_rounding)
    assert not verified(model)
    kwargs = SamplingParams(max_new_tokens=4).generate_kwargs()
    assert choose_decoder(model, kwargs, "auto") == "compacting"


def test_probe_runs_once_per_configuration_device_and_dtype(monkeypatch):
    model, _ = tiny_pair()
    calls = []
    real = direct_step._probe
    monkeypatch.setattr(direct_step, "_probe", lambda m: calls.append(1) or real(m))
    assert verified(model) and verified(model)
    assert len(calls) == 1
    model.to(torch.float64)
    verified(model)
    assert len(calls) == 2


def test_models_of_one_configuration_share_the_verdict(monkeypatch):
    first, _ = tiny_pair(seed=1)
    second, _ = tiny_pair(seed=2)  # same class and configuration, other weights
    other, _ = tiny_pair(arch="llama")
    calls = []
    real = direct_step._probe
    monkeypatch.setattr(direct_step, "_probe", lambda m: calls.append(m) or real(m))
    assert verified(first) and verified(second)
    assert calls == [first]
    second.config.rms_norm_eps = 1e-5  # a configuration change is a new question
    assert verified(second)
    assert verified(other)
    assert calls == [first, second, other]


def _hooked(model):
    model.model.layers[0].mlp.register_forward_hook(lambda *a: None)


def _adapted(model):
    class LoraLinear(torch.nn.Linear):
        pass

    proj = model.model.layers[0].self_attn.q_proj
    adapted = LoraLinear(proj.in_features, proj.out_features, bias=proj.bias is not None)
    model.model.layers[0].self_attn.q_proj = adapted


def _eager(model):
    model.config._attn_implementation = "eager"


def _sliding_window(model):
    model.config.sliding_window = 4096  # as Mistral-7B-v0.1 ships
    model.config.use_sliding_window = True


def _dynamic_rope(model):
    model.config.rope_parameters = {"rope_type": "dynamic", "rope_theta": 1e4, "factor": 2.0}


@pytest.mark.parametrize(
    "change, reason",
    [
        (_hooked, "forward hooks"),
        (_adapted, "plain nn.Linear"),
        (_eager, "sdpa"),
        (_dynamic_rope, "sequence length"),
        (_sliding_window, "sliding-window"),
    ],
    ids=["hooks", "adapter", "eager", "dynamic-rope", "sliding-window"],
)
def test_unmirrored_modules_block_the_direct_step(change, reason):
    model, _ = tiny_pair()
    assert verified(model)
    change(model)
    assert reason in direct_step_blocker(model)
    assert not verified(model)  # checked every call, not cached with the probe


def _captures_installed(model) -> bool:
    return any(
        hook.__module__ == "transformers.utils.output_capturing"
        for module in model.modules()
        for hook in module._forward_hooks.values()
    )


def test_a_scoring_forward_and_an_update_keep_the_direct_step():
    from comlrl.core.logprobs import token_logprobs

    model, tok = tiny_pair()
    assert verified(model)
    assert not _captures_installed(model)
    model.train()
    ids = tokenize_prompts(tok, prompts(2))
    scored = token_logprobs(model, ids, [[5, 6, 7], [8, 9]], pad_id=tok.pad_token_id, grad=True)
    scored.sequence_sum().sum().backward()
    torch.optim.AdamW(model.parameters(), lr=1e-3).step()
    model.eval()
    # The scoring forward asked transformers for hidden states, which hooks every layer.
    assert _captures_installed(model)
    assert direct_step_blocker(model) is None
    assert verified(model)
    # The recording hooks stay inert while the direct step decodes: same tokens as forward.
    params = SamplingParams(max_new_tokens=12)
    assert _decode(model, tok, params, 3, 2, seed=5, direct=True) == _decode(
        model, tok, params, 3, 2, seed=5, direct=False
    )
