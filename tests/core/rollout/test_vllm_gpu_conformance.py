"""The real vLLM engine passes the conformance suite: only where vLLM and a CUDA device
exist (benchmarks/gpu_check.sh runs it there; skipped everywhere else, including CI)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from tests.core.rollout.backend_conformance import BackendConformance, Harness, perturb

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="vLLM is not installed"
)


@pytest.fixture(scope="module")
def gpu_harness():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from comlrl.core.rollout.backends.vllm.backend import build_vllm_backend
    from comlrl.core.testing import tiny_model_dir
    from tests.core.rollout.test_vllm_conformance import backend_inputs

    path = os.environ.get("COMLRL_VLLM_TEST_MODEL") or tiny_model_dir(pretrain_steps=0)
    tok = AutoTokenizer.from_pretrained(path)
    models = [
        AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).cuda().eval()
        for _ in range(2)
    ]
    options = {"gpu_memory_utilization": 0.2, "dtype": "float32", "enforce_eager": True}
    backend = build_vllm_backend(backend_inputs(models, [tok, tok], options))
    steps = iter(range(100))

    def update(agent):
        # Small: at 0.5B a large perturbation would overflow the activations.
        perturb(models[agent], seed=next(steps), scale=0.02)
        backend.on_weights_updated(agent, models[agent])

    # Kernels differ between engines; a loose bound still catches a wrong temperature.
    return Harness(backend, models, [tok, tok], update, logprob_tolerance=0.05)


class TestVLLMGPUConformance(BackendConformance):
    @pytest.fixture
    def harness(self, gpu_harness):
        return gpu_harness
