"""The vLLM backend's logic layer passes the conformance suite over an in-process fake
engine (tests/core/rollout/fake_engine.py): full-weight agents (one engine each, weights pushed
after updates) and LoRA agents of one base (one engine, one adapter slot per agent)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from comlrl.core.rollout.backends import BackendInputs
from comlrl.core.rollout.backends.vllm.backend import build_vllm_backend
from comlrl.core.testing import build_model, build_tokenizer, tiny_model_dir
from tests.core.rollout.backend_conformance import BackendConformance, Harness, perturb, sampling
from tests.core.rollout.fake_engine import FakeEngine


def backend_inputs(models, tokenizers, options=None):
    """What the registry gives a factory, for agents built here."""
    return BackendInputs(
        models, tokenizers, SimpleNamespace(rollout_backend_options=options, seed=0)
    )


def harness_for(models, tok, options=None):
    FakeEngine.instances.clear()
    backend = build_vllm_backend(backend_inputs(models, [tok, tok], options), FakeEngine)
    steps = iter(range(100))

    def update(agent):
        perturb(models[agent], seed=next(steps), scale=0.5)
        backend.on_weights_updated(agent, models[agent])

    return Harness(backend, models, [tok, tok], update, logprob_tolerance=1e-4)


@pytest.fixture
def full_harness():
    tok = build_tokenizer()
    return harness_for([build_model(tok, seed=0), build_model(tok, seed=1)], tok)


@pytest.fixture
def lora_harness():
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_model_dir(pretrain_steps=0)
    tok = AutoTokenizer.from_pretrained(path)
    models = []
    for _ in range(2):
        base = AutoModelForCausalLM.from_pretrained(path)
        cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
        models.append(get_peft_model(base, cfg).eval())
    return harness_for(models, tok)


class TestVLLMFullWeightsConformance(BackendConformance):
    @pytest.fixture
    def harness(self, full_harness):
        return full_harness


class TestVLLMAdapterConformance(BackendConformance):
    @pytest.fixture
    def harness(self, lora_harness):
        return lora_harness


def test_full_weight_agents_get_one_engine_each_and_pushes_follow_updates(full_harness):
    h = full_harness
    assert len(FakeEngine.instances) == 2
    assert all(e.max_loras == 0 for e in FakeEngine.instances)
    ids = [[5, 6, 7]]
    h.backend.generate_ids(0, ids, 2, sampling())
    assert not any(c[0] == "load_weights" for c in FakeEngine.instances[0].log)
    h.update(0)
    h.update(0)  # two steps before the next rollout: one push
    h.backend.generate_ids(0, ids, 2, sampling())
    assert [c[0] for c in FakeEngine.instances[0].log].count("load_weights") == 1
    assert not any(c[0] == "load_weights" for c in FakeEngine.instances[1].log)


def test_lora_agents_share_one_engine_and_renew_their_slot(lora_harness):
    h = lora_harness
    assert len(FakeEngine.instances) == 1 and FakeEngine.instances[0].max_loras == 2
    engine = FakeEngine.instances[0]
    h.backend.generate_ids(0, [[5, 6]], 1, sampling())
    h.backend.generate_ids(1, [[5, 6]], 1, sampling())
    first = {c[1] for c in engine.log if c[0] == "load_adapter"}
    assert len(first) == 2  # one slot per agent
    h.update(0)
    h.backend.generate_ids(0, [[5, 6]], 1, sampling())
    dropped = [c[1] for c in engine.log if c[0] == "drop_adapter"]
    loaded = [c[1] for c in engine.log if c[0] == "load_adapter"]
    assert len(dropped) == 1 and dropped[0] in first
    assert loaded[-1] not in first  # a fresh id, never reused


def test_sleep_mode_sleeps_between_rollouts_and_wakes_before_the_next():
    tok = build_tokenizer()
    h = harness_for(
        [build_model(tok, seed=0), build_model(tok, seed=1)], tok, {"enable_sleep_mode": True}
    )
    engine = FakeEngine.instances[0]
    h.backend.generate_ids(0, [[5, 6]], 1, sampling())
    h.backend.generate_ids(0, [[5, 6]], 1, sampling())
    assert [c[0] for c in engine.log] == ["generate", "sleep", "wake_up", "generate", "sleep"]


def test_weight_sync_interval_pushes_every_k_steps():
    tok = build_tokenizer()
    h = harness_for(
        [build_model(tok, seed=0), build_model(tok, seed=1)], tok, {"weight_sync_interval": 3}
    )
    engine = FakeEngine.instances[0]
    pushes = []
    for _ in range(6):
        h.update(0)
        h.backend.generate_ids(0, [[5, 6]], 1, sampling())
        pushes.append([c[0] for c in engine.log].count("load_weights"))
    assert pushes == [0, 0, 1, 1, 1, 2]


def test_the_logprob_diagnostic_is_measured_every_interval_rollouts():
    tok = build_tokenizer()
    models = [build_model(tok, seed=0), build_model(tok, seed=1)]
    h = harness_for(models, tok, {"logprob_diagnostic_interval": 2})
    assert h.backend.drain_metrics() == {}
    h.backend.generate_ids(0, [[5, 6, 7]], 4, sampling(temperature=0.8))
    assert h.backend.drain_metrics() == {}  # the first of two rollouts: not measured
    h.backend.generate_ids(0, [[5, 6, 7]], 4, sampling(temperature=0.8))
    metrics = h.backend.drain_metrics()
    assert 0 <= metrics["rollout/logprob_abs_diff"] < 1e-4
    assert h.backend.drain_metrics() == {}


def test_a_stale_engine_shows_in_the_logprob_diagnostic():
    tok = build_tokenizer()
    models = [build_model(tok, seed=0), build_model(tok, seed=1)]
    # Pushes only every 100 steps: after an update the engine samples from old weights.
    h = harness_for(models, tok, {"logprob_diagnostic_interval": 1, "weight_sync_interval": 100})
    h.update(0)
    h.backend.generate_ids(0, [[5, 6, 7]], 4, sampling(temperature=0.8))
    assert h.backend.drain_metrics()["rollout/logprob_abs_diff"] > 0.01


def test_agents_sharing_one_model_share_its_engine_and_its_pushes():
    tok = build_tokenizer()
    shared = build_model(tok, seed=0)
    h = harness_for([shared, shared], tok)
    assert len(FakeEngine.instances) == 1
    engine = FakeEngine.instances[0]
    before = h.backend.generate_ids(1, [[5, 6, 7]], 4, sampling(), [3])
    h.update(0)  # agent 0's step changes agent 1's weights too
    after = h.backend.generate_ids(1, [[5, 6, 7]], 4, sampling(), [3])
    assert [c[0] for c in engine.log].count("load_weights") == 1
    assert after[0].completion_ids != before[0].completion_ids
    h.backend.generate_ids(0, [[5, 6, 7]], 4, sampling(), [3])
    assert [c[0] for c in engine.log].count("load_weights") == 1  # already pushed
