"""The HF backend passes the backend conformance suite on CPU."""

from __future__ import annotations

import pytest

from comlrl.core.rollout.backends.hf import HFBackend
from comlrl.core.testing import build_model, build_tokenizer
from tests.core.rollout.backend_conformance import BackendConformance, Harness, perturb


@pytest.fixture
def harness():
    tok = build_tokenizer()
    models = [build_model(tok, seed=0), build_model(tok, seed=1)]
    backend = HFBackend(models, [tok, tok])
    steps = iter(range(100))

    def update(agent):
        perturb(models[agent], seed=next(steps))
        backend.on_weights_updated(agent, models[agent])

    return Harness(backend, models, [tok, tok], update, logprob_tolerance=None)


class TestHFConformance(BackendConformance):
    pass
