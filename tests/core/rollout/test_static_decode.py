"""The decode fast path (static KV cache, compiled step) returns what today's compacting decoder
returns, token for token, and every case it cannot serve falls back to the compacting decoder."""

import warnings

import pytest
import torch

import comlrl.core.rollout.generation as generation
from comlrl.core.rollout import static_decode
from comlrl.core.rollout.backends.hf import HFBackend
from comlrl.core.rollout.decoding import decode_compacting
from comlrl.core.rollout.generation import SamplingParams, left_pad, tokenize_prompts
from comlrl.core.rollout.static_decode import choose_decoder, decode_static, fast_path_blocker
from comlrl.core.testing import prompts, tiny_pair


@pytest.fixture(scope="module")
def pair():
    model, tok = tiny_pair(pretrain_steps=40)
    return model.eval(), tok


def _inputs(tok, n):
    return left_pad(tokenize_prompts(tok, prompts(n)), tok.pad_token_id)


def _decode(fn, model, tok, params, n, copies, seed, **kw):
    ids, mask = _inputs(tok, n)
    gen = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        return fn(
            model,
            ids,
            mask,
            params.generate_kwargs(),
            {tok.eos_token_id},
            tok.pad_token_id,
            copies,
            gen,
            **kw,
        )


@pytest.mark.parametrize(
    "params, copies",
    [
        (SamplingParams(max_new_tokens=20, do_sample=False), 1),
        (SamplingParams(max_new_tokens=20), 3),
        (SamplingParams(max_new_tokens=20, temperature=1.0, top_p=1.0, top_k=None), 2),
        (SamplingParams(max_new_tokens=20, extra={"min_new_tokens": 2}), 2),
    ],
    ids=["greedy", "warped", "plain", "min_new_tokens"],
)
def test_static_cache_decoding_equals_compacting(pair, params, copies):
    model, tok = pair
    today = _decode(decode_compacting, model, tok, params, 5, copies, seed=3)
    fast = _decode(decode_static, model, tok, params, 5, copies, seed=3, compile_backend=None)
    assert fast == today
    if params.do_sample:  # rows finish at different steps: the bucketed row drops run
        assert len({len(r) for r in today}) > 1


def test_compiled_step_equals_compacting(pair):
    model, tok = pair
    for params in (SamplingParams(max_new_tokens=10, do_sample=False), SamplingParams(10)):
        # two rows either way, so both share the first graph
        today = _decode(decode_compacting, model, tok, params, 2, 1, seed=7)
        # a captured graph (the inductor backend compiles the same graph to C++/CUDA kernels)
        fast = _decode(decode_static, model, tok, params, 2, 1, seed=7, compile_backend="aot_eager")
        assert fast == today


def test_compacting_and_fast_path_consume_the_same_random_numbers(pair):
    model, tok = pair
    params = SamplingParams(max_new_tokens=12)
    ids, mask = _inputs(tok, 3)
    after = []
    for fn, kw in ((decode_compacting, {}), (decode_static, {"compile_backend": None})):
        gen = torch.Generator().manual_seed(11)
        with torch.inference_mode():
            fn(model, ids, mask, params.generate_kwargs(), {tok.eos_token_id}, 0, 4, gen, **kw)
        after.append(torch.rand(4, generator=gen))
    assert torch.equal(after[0], after[1])


def test_modes_choose_the_decoder(pair):
    model, _ = pair
    kwargs = SamplingParams(max_new_tokens=4).generate_kwargs()
    assert fast_path_blocker(model, kwargs) is None
    assert choose_decoder(model, kwargs, "compiled") == "static"
    assert choose_decoder(model, kwargs, "off") == "compacting"
    # auto: the compiled path only on CUDA devices (on CPU it measured slower), else direct
    assert choose_decoder(model, kwargs, "auto") == "direct"
    assert choose_decoder(model, kwargs, "direct") == "direct"
    with pytest.raises(ValueError, match="decode_fast_path"):
        choose_decoder(model, kwargs, "fast")


def _assert_falls_back(model, kwargs, reason):
    assert reason in fast_path_blocker(model, kwargs)
    static_decode._warned.clear()
    with pytest.warns(UserWarning, match="decoding through model.forward"):
        assert choose_decoder(model, kwargs, "compiled") == "compacting"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per model class and reason
        assert choose_decoder(model, kwargs, "compiled") == "compacting"
        assert choose_decoder(model, kwargs, "auto") != "static"


def test_unsupported_sampling_falls_back(pair):
    model, _ = pair
    kwargs = SamplingParams(max_new_tokens=4, extra={"repetition_penalty": 1.3}).generate_kwargs()
    _assert_falls_back(model, kwargs, "model.generate")


def test_model_without_static_cache_support_falls_back(pair, monkeypatch):
    model, _ = pair
    monkeypatch.setattr(type(model), "_can_compile_fullgraph", False)
    _assert_falls_back(model, SamplingParams(4).generate_kwargs(), "static-cache")


def test_split_or_offloaded_model_falls_back(pair, monkeypatch):
    model, _ = pair
    kwargs = SamplingParams(4).generate_kwargs()
    split = {"model.layers.0": "cpu", "lm_head": "disk"}
    monkeypatch.setattr(model, "hf_device_map", split, raising=False)
    _assert_falls_back(model, kwargs, "offloaded")
    model.hf_device_map = {"": "cpu"}  # one device: not a reason by itself
    meta = torch.nn.Parameter(torch.empty(2, device="meta"))
    monkeypatch.setattr(model, "offloaded", meta, raising=False)
    _assert_falls_back(model, kwargs, "meta")


def test_sharded_model_falls_back(pair, monkeypatch):
    model, _ = pair

    class Sharded(torch.nn.Parameter):
        device_mesh = "mesh"  # what a DTensor parameter carries

    monkeypatch.setattr(model, "sharded", Sharded(torch.zeros(2)), raising=False)
    _assert_falls_back(model, SamplingParams(4).generate_kwargs(), "sharded")


def test_sliding_window_model_falls_back(pair, monkeypatch):
    model, _ = pair
    layers = ["sliding_attention"] * model.config.num_hidden_layers
    monkeypatch.setattr(model.config, "layer_types", layers)
    _assert_falls_back(model, SamplingParams(4).generate_kwargs(), "sliding-window")


def test_backend_routes_the_setting_to_the_decoder(pair, monkeypatch):
    model, tok = pair
    calls = []
    real = generation.decode_static

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs, compile_backend=None)

    monkeypatch.setattr(generation, "decode_static", spy)
    params = SamplingParams(max_new_tokens=6)
    seen = {}
    for mode in ("off", "compiled"):
        torch.manual_seed(0)
        out = HFBackend([model], [tok], fast_path=mode).generate(0, prompts(2), 2, params)
        seen[mode] = [s.completion_ids for s in out]
        assert len(calls) == (mode == "compiled")
    assert seen["compiled"] == seen["off"]
    backend = HFBackend([model], [tok], fast_path="compiled")
    seeded = backend.generate(0, prompts(2), 2, params, [1, 2])
    assert len(calls) == 3 and len(seeded) == 2


def test_config_field_is_checked():
    from comlrl.core.config.base import CommonConfig

    assert CommonConfig().decode_fast_path == "auto"
    assert CommonConfig(decode_fast_path="Direct").decode_fast_path == "direct"
    for bad in ("fast", "on"):
        with pytest.raises(ValueError, match="decode_fast_path"):
            CommonConfig(decode_fast_path=bad)
