"""One rollout-backend contract: a backend implements ``generate_ids`` and
``on_weights_updated`` (:class:`RolloutBackend`), and the ``rollout_backend`` field chooses it
by name among the registered backends (built-in hf and vllm, and plugins)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

from comlrl.core.config.base import CommonConfig
from comlrl.core.rollout import backends
from comlrl.core.rollout.backends import BackendInputs, RolloutBackend, TextSampling
from comlrl.core.rollout.backends.hf import HFBackend
from comlrl.core.rollout.backends.text import WithText
from comlrl.core.rollout.backends.vllm.backend import VLLMBackend, build_vllm_backend
from comlrl.core.testing import build_model, build_tokenizer
from tests.core.rollout.fake_engine import FakeEngine
from tests.reinforce.helpers import make_trainer

METHODS = ("generate_ids", "on_weights_updated")


class IdsOnly:
    """A plugin backend with the two protocol methods and nothing else, over the HF one."""

    def __init__(self, inputs: BackendInputs):
        self.inputs = inputs
        self.inner = HFBackend(inputs.agents, inputs.tokenizers)
        self.calls: list[int] = []
        self.updates: list[int] = []

    def generate_ids(self, agent, prompt_ids, n, params, seeds=None):
        self.calls.append(agent)
        return self.inner.generate_ids(agent, prompt_ids, n, params, seeds)

    def on_weights_updated(self, agent, model):
        self.updates.append(agent)


@pytest.fixture
def registered():
    backends.register_rollout_backend("ids_only", IdsOnly)
    yield
    backends.unregister_rollout_backend("ids_only")


def test_a_registered_backend_is_chosen_by_the_field_and_serves_the_run(tmp_path, registered):
    trainer = make_trainer(tmp_path, rollout_backend="ids_only", num_train_epochs=1)
    held = trainer.rollout_backend
    # Core samples text through the plugin's ids, with the agents' tokenizers.
    assert isinstance(held, WithText) and isinstance(held.backend, IdsOnly)
    plugin = held.backend
    assert list(plugin.inputs.agents) == list(trainer.agents)
    assert plugin.inputs.args is trainer.args and plugin.inputs.fsdp is False
    trainer.train()
    assert sorted(set(plugin.calls)) == [0, 1]
    # Every optimizer step of each agent reached the backend.
    assert sorted(set(plugin.updates)) == [0, 1]
    assert trainer.env_step > 0


def test_an_unknown_name_is_refused_with_the_field_and_the_valid_names(registered):
    with pytest.raises(ValueError) as err:
        CommonConfig(rollout_backend="sglang")
    msg = str(err.value)
    assert "rollout_backend='sglang' is not a known rollout backend" in msg
    assert "valid: hf, vllm, ids_only" in msg
    with pytest.raises(ValueError, match="rollout_backend must be a backend name; valid: hf"):
        CommonConfig(rollout_backend=3)


def test_a_registered_name_is_checked_for_its_packages_and_taken_once():
    backends.register_rollout_backend(
        "mine", IdsOnly, requires=["no_such_module_xyz"], install="pip install mine"
    )
    try:
        assert "mine" in backends.available_rollout_backends()
        with pytest.raises(
            ValueError, match="rollout_backend='mine' needs no_such_module_xyz.*pip install mine"
        ):
            backends.check_rollout_backend("mine")
        with pytest.raises(ValueError, match="already registered"):
            backends.register_rollout_backend("MINE", IdsOnly)
        with pytest.raises(ValueError, match="already registered"):
            backends.register_rollout_backend("hf", IdsOnly)
    finally:
        backends.unregister_rollout_backend("mine")
    assert "mine" not in backends.available_rollout_backends()


def _host(name):
    tok = build_tokenizer()
    args = CommonConfig(rollout_backend=name)
    return SimpleNamespace(
        agents=[build_model(tok, seed=0)],
        tokenizers=[tok],
        args=args,
        dist=SimpleNamespace(sharding=None),
    )


def test_a_factory_that_builds_no_backend_is_refused_naming_what_is_missing():
    backends.register_rollout_backend("text_only", lambda inputs: SimpleNamespace(generate=len))
    try:
        with pytest.raises(TypeError) as err:
            backends.build_rollout_backend(_host("text_only"))
    finally:
        backends.unregister_rollout_backend("text_only")
    msg = str(err.value)
    assert "rollout_backend='text_only'" in msg
    assert "has no generate_ids, on_weights_updated" in msg


def _signature(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("cls", [HFBackend, VLLMBackend])
def test_the_built_in_backends_implement_the_protocol(cls):
    for method in METHODS:
        assert _signature(getattr(cls, method)) == _signature(getattr(RolloutBackend, method))


def test_the_built_in_backends_are_built_by_name_with_the_text_form():
    hf = backends.build_rollout_backend(_host("hf"))
    assert type(hf) is HFBackend and isinstance(hf, RolloutBackend)
    tok = build_tokenizer()
    models = [build_model(tok, seed=0)]
    FakeEngine.instances.clear()
    inputs = BackendInputs(models, [tok], SimpleNamespace(rollout_backend_options=None, seed=0))
    vllm = build_vllm_backend(inputs, FakeEngine)
    assert isinstance(vllm, RolloutBackend) and isinstance(vllm, TextSampling)
    assert len(FakeEngine.instances) == 1


def test_the_vllm_backend_refuses_fsdp_agents():
    tok = build_tokenizer()
    inputs = BackendInputs(
        [build_model(tok, seed=0)],
        [tok],
        SimpleNamespace(rollout_backend_options=None, seed=0),
        fsdp=True,
    )
    with pytest.raises(
        ValueError, match="cannot serve FSDP-sharded agents.*distributed_mode='ddp'"
    ):
        build_vllm_backend(inputs, FakeEngine)
