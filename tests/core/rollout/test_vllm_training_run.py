"""A MAGRPO run whose rollouts come from the vLLM backend's logic over the fake engine: the
config field chooses the backend, every optimizer step reaches the engine before the next
rollout, and the log-prob diagnostic lands in metrics.jsonl."""

from __future__ import annotations

import pytest

from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.rollout import backends
from comlrl.core.rollout.backends.vllm.backend import VLLMBackend, build_vllm_backend
from tests.core.rollout.fake_engine import FakeEngine
from tests.reinforce.helpers import make_trainer


@pytest.fixture
def fake_vllm():
    backends.register_rollout_backend(
        "fake_vllm",
        lambda inputs: build_vllm_backend(inputs, FakeEngine),
        check_options=lambda options: None,
    )
    FakeEngine.instances.clear()
    yield
    backends.unregister_rollout_backend("fake_vllm")


def test_a_training_run_samples_from_the_engine_and_pushes_every_step(tmp_path, fake_vllm):
    trainer = make_trainer(
        tmp_path,
        num_train_epochs=3,
        rollout_backend="fake_vllm",
        rollout_backend_options={"logprob_diagnostic_interval": 1},
    )
    assert isinstance(trainer.rollout_backend, VLLMBackend)
    assert len(FakeEngine.instances) == 2  # two full-weight agents, one engine each
    trainer.train()
    for agent, engine in enumerate(FakeEngine.instances):
        calls = [c[0] for c in engine.log]
        assert calls.count("generate") >= 2, calls
        # Every rollout after the first one follows an optimizer step: weights pushed first.
        first = calls.index("generate")
        assert all(c == "load_weights" for c in calls[:first])
        pushes = calls.count("load_weights")
        assert pushes == trainer.rollout_backend.sync.pushes[agent] > 0
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    diffs = [r["rollout/logprob_abs_diff"] for r in records if "rollout/logprob_abs_diff" in r]
    assert diffs and all(0 <= d < 1e-3 for d in diffs), diffs
