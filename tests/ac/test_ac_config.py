"""Every IACConfig/MAACConfig field: valid values construct, invalid ones raise naming the field,
plus the constraints that tie fields together."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.ac import IACConfig, MAACConfig
from tests.core.real_model_fields import FIELDS as REAL_MODEL_FIELDS
from tests.core.real_model_fields import extra as real_model_extra

pos_int = st.integers(1, 1000)
nonneg_int = st.integers(0, 1000)
bad_pos_int = st.one_of(
    st.integers(-1000, 0), st.floats(0.5, 10), st.just(True), st.text(max_size=3)
)
bad_nonneg_int = st.one_of(st.integers(-1000, -1), st.floats(0.5, 10), st.just(False))
opt_pos_int = st.one_of(st.none(), pos_int)
bad_bool = st.one_of(st.integers(0, 1), st.text(max_size=3), st.none())
devices = st.one_of(st.none(), st.just("cpu"), st.just(["cpu"]))
pos_float = st.floats(1e-9, 1.0)
bad_pos_float = st.one_of(st.floats(-1, 0), st.just(float("nan")), st.just("x"))

# field -> (valid strategy, invalid strategy); shared by both configs
COMMON = {
    "agent_learning_rate": (pos_float, bad_pos_float),
    "critic_learning_rate": (st.one_of(st.none(), pos_float), bad_pos_float),
    "rollout_buffer_size": (pos_int, bad_pos_int),
    "train_batch_size": (opt_pos_int, bad_pos_int),
    "value_clip_range": (
        st.one_of(st.none(), st.floats(1e-6, 10)),
        st.one_of(st.floats(-1, 0), st.just(float("inf"))),
    ),
    "value_loss_coef": (st.floats(1e-6, 10), st.one_of(st.floats(-1, 0), st.just(None))),
    "advantage_normalization": (st.booleans(), bad_bool),
    "max_new_tokens": (pos_int, bad_pos_int),
    "temperature": (st.floats(0.01, 5.0), st.one_of(st.floats(-5, 0), st.just(float("inf")))),
    "top_p": (st.floats(0.01, 1.0), st.one_of(st.floats(-1, 0), st.floats(1.01, 5))),
    "top_k": (st.one_of(st.none(), nonneg_int), bad_nonneg_int),
    "num_train_epochs": (pos_int, bad_pos_int),
    "critic_type": (
        st.sampled_from(["v", "q", "V", " Q "]),
        st.sampled_from(["a", "", "vq", None]),
    ),
    "critic_value_head_hidden_dim": (opt_pos_int, bad_pos_int),
    "num_agents": (opt_pos_int, bad_pos_int),
    "num_turns": (pos_int.filter(lambda x: x <= 5), bad_pos_int),
    "num_generations": (st.integers(1, 64), bad_pos_int),
    "parallel_training": (
        st.sampled_from(["none", "NONE", " null ", None]),
        st.sampled_from(["auto", "ddp", "x", 3]),
    ),
    "agent_devices": (devices, st.just([])),
    "critic_devices": (devices, st.just([])),
    "external_prompt_passthrough": (st.booleans(), bad_bool),
    "discount": (st.floats(0.0, 1.0), st.one_of(st.floats(-1, -0.01), st.floats(1.01, 3))),
    "gae_lambda": (
        st.floats(0.0, 1.0),
        st.one_of(st.floats(-1, -0.01), st.floats(1.01, 3), st.just(float("nan"))),
    ),
    "policy_loss": (
        st.sampled_from(["reinforce", "ppo", "gspo"]),
        st.sampled_from(["clipped", "", None, 3]),
    ),
    "num_iterations": (st.integers(1, 8), bad_pos_int),
    "epsilon": (
        st.floats(1e-6, 0.999),
        st.one_of(st.floats(-1, 0), st.floats(1, 3), st.just(float("nan")), st.just(None)),
    ),
    "epsilon_high": (
        st.one_of(st.none(), st.floats(1e-6, 5)),
        st.one_of(st.floats(-1, 0), st.just(float("inf")), st.just("x")),
    ),
    "clip_ratio_c": (
        st.one_of(st.none(), st.floats(1.01, 10)),
        st.sampled_from([1.0, 0.5, -3.0, float("nan")]),
    ),
    "loss_aggregation": (
        st.sampled_from(["sum", "sequence_mean", "token_mean", "grpo", "bnpo", "dapo"]),
        st.sampled_from(["constant", "dr_grpo", "mean", "", None, 1]),
    ),
    "eval_interval": (nonneg_int, bad_nonneg_int),
    "eval_num_samples": (nonneg_int, bad_nonneg_int),
    "eval_batch_size": (pos_int, bad_pos_int),
    "early_termination_threshold": (
        st.one_of(st.none(), st.floats(-10, 10)),
        st.sampled_from([float("nan"), "high"]),
    ),
    "logging_steps": (pos_int, bad_pos_int),
    "reference_kl_enabled": (st.booleans(), bad_bool),
    "reference_kl_coef": (st.floats(0, 10), st.floats(-10, -0.001)),
    "reference_kl_estimator": (st.sampled_from([None, "k1", "k2", "k3"]), st.just("k4")),
    "reference_devices": (devices, st.just([])),
    "seed": (st.one_of(st.none(), nonneg_int), bad_nonneg_int),
    "output_dir": (st.one_of(st.none(), st.just("runs/x")), st.just(3)),
    "rollout_batch_size": (opt_pos_int, bad_pos_int),
    "generation_batch_size": (opt_pos_int, bad_pos_int),
    "logprob_max_tokens": (st.one_of(opt_pos_int, st.just("auto")), bad_pos_int),
    "max_grad_norm": (st.one_of(st.none(), st.floats(0.01, 100)), st.floats(-5, 0)),
    "weight_decay": (st.floats(0, 1), st.floats(-1, -0.001)),
    "reward_call_mode": (st.sampled_from(["auto", "batch", "per_sample"]), st.just("parallel")),
    "nonfinite_loss": (st.sampled_from(["raise", "skip"]), st.just("zero")),
    "eval_greedy": (st.booleans(), bad_bool),
    "eval_at_end": (st.booleans(), bad_bool),
    "show_eval_sample": (st.booleans(), bad_bool),
    "log_completions": (
        nonneg_int,
        st.one_of(st.integers(-1000, -1), st.floats(0.5, 10), st.text(max_size=3), st.none()),
    ),
    "distributed_mode": (
        st.sampled_from(["auto", "single", "ddp", " DDP ", "fsdp", "FSDP"]),
        st.sampled_from(["deepspeed", "zero3", "", None, 2]),
    ),
    "item_seeded_sampling": (st.booleans(), bad_bool),
    "decode_fast_path": (
        st.sampled_from(["auto", "direct", "compiled", "off", " OFF "]),
        st.sampled_from(["fast", "on", "", None, 1]),
    ),
    "report_to": (
        st.sampled_from([None, "jsonl", ["jsonl", "tensorboard"], ["wandb"]]),
        st.sampled_from(["tensorbord", ["jsonl", 3], 5]),
    ),
    **REAL_MODEL_FIELDS,
}
IAC_ONLY = {
    "use_separate_critic": (st.booleans(), bad_bool),
    "value_head_hidden_dim": (opt_pos_int, bad_pos_int),
}
TABLES = {IACConfig: {**COMMON, **IAC_ONLY}, MAACConfig: dict(COMMON)}


def _extra(cls, field):
    """Settings a field needs to be checked at all (or to be valid with a given value)."""
    if field == "reference_devices":
        return {"reference_kl_enabled": True, "num_agents": 2}
    if field in ("num_turns", "num_generations"):
        return {"num_turns": 1} if field == "num_generations" else {"num_generations": 1}
    if field in ("num_iterations", "epsilon", "epsilon_high", "clip_ratio_c"):
        return {"policy_loss": "ppo"}
    if cls is IACConfig and field == "value_head_hidden_dim":
        return {"use_separate_critic": False}
    return real_model_extra(field)


def test_tables_cover_every_field():
    for cls, table in TABLES.items():
        assert set(table) == {f.name for f in dataclasses.fields(cls)}, cls.__name__


CASES = [(cls, field) for cls, table in TABLES.items() for field in sorted(table)]


@pytest.mark.parametrize("cls, field", CASES, ids=[f"{c.__name__}-{f}" for c, f in CASES])
def test_field_constraints(cls, field):
    valid, invalid = TABLES[cls][field]

    @settings(max_examples=12, deadline=None)
    @given(valid)
    def check_valid(value):
        cls(**{field: value, **_extra(cls, field)})

    @settings(max_examples=12, deadline=None)
    @given(invalid)
    def check_invalid(value):
        with pytest.raises(ValueError, match=field):
            cls(**{field: value, **_extra(cls, field)})

    check_valid()
    check_invalid()


@pytest.mark.parametrize("cls", [IACConfig, MAACConfig])
@settings(max_examples=20, deadline=None)
@given(turns=st.integers(2, 6), gens=st.integers(2, 16))
def test_multi_turn_needs_one_generation(cls, turns, gens):
    with pytest.raises(ValueError, match="num_generations"):
        cls(num_turns=turns, num_generations=gens)
    assert cls(num_turns=turns, num_generations=1).num_turns == turns
    assert cls(num_turns=1, num_generations=gens).num_generations == gens


@pytest.mark.parametrize("cls", [IACConfig, MAACConfig])
@settings(max_examples=15, deadline=None)
@given(lr=st.floats(1e-8, 1.0), buffer=st.integers(1, 64))
def test_derived_defaults(cls, lr, buffer):
    c = cls(agent_learning_rate=lr, critic_learning_rate=None, rollout_buffer_size=buffer)
    assert c.critic_learning_rate == lr
    assert c.train_batch_size == buffer


@pytest.mark.parametrize("cls", [IACConfig, MAACConfig])
def test_critic_type_is_normalized(cls):
    assert cls(critic_type=" Q").critic_type == "q"
    assert cls(critic_type="V").uses_q_critic is False


@pytest.mark.parametrize("cls", [IACConfig, MAACConfig])
def test_mp_requires_agent_and_critic_devices(cls):
    with pytest.raises(ValueError, match="agent_devices"):
        cls(parallel_training="mp", critic_devices="cpu")
    with pytest.raises(ValueError, match="critic_devices"):
        cls(parallel_training="mp", agent_devices=["cpu", "cpu"])
    ok = cls(parallel_training="MP", agent_devices=["cpu", "cpu"], critic_devices="cpu")
    assert ok.parallel_training == "mp"


def test_iac_value_heads_need_no_critic_devices():
    c = IACConfig(parallel_training="mp", agent_devices=["cpu", "cpu"], use_separate_critic=False)
    assert c.critic_devices is None
    # 1.4.3 configs name the actors' own device; the trainer checks it against their placement.
    assert IACConfig(use_separate_critic=False, critic_devices="cpu").critic_devices == "cpu"
    with pytest.raises(ValueError, match="critic_devices has an invalid device"):
        IACConfig(use_separate_critic=False, critic_devices="gpu7")


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 6), k=st.integers(2, 8))
def test_iac_critic_devices_length_checked_against_agents(n, k):
    if k == n:
        IACConfig(num_agents=n, critic_devices=["cpu"] * k)
        return
    with pytest.raises(ValueError, match="critic_devices length"):
        IACConfig(num_agents=n, critic_devices=["cpu"] * k)


@settings(max_examples=10, deadline=None)
@given(k=st.integers(2, 8))
def test_maac_has_one_critic_device(k):
    with pytest.raises(ValueError, match="critic_devices"):
        MAACConfig(critic_devices=["cpu"] * k)
    assert MAACConfig(critic_devices=["cpu"]).critic_devices == ["cpu"]


def test_iac_head_dims_belong_to_their_mode():
    with pytest.raises(ValueError, match="value_head_hidden_dim"):
        IACConfig(use_separate_critic=True, value_head_hidden_dim=16)
    with pytest.raises(ValueError, match="critic_value_head_hidden_dim"):
        IACConfig(use_separate_critic=False, critic_value_head_hidden_dim=16)
    assert IACConfig(use_separate_critic=False, value_head_hidden_dim=16).value_head_hidden_dim
    assert IACConfig(critic_value_head_hidden_dim=16).critic_value_head_hidden_dim == 16


def test_defaults_match_reference():
    c = IACConfig()
    assert (c.agent_learning_rate, c.critic_learning_rate, c.rollout_buffer_size) == (
        5e-6,
        5e-6,
        8,
    )
    assert (c.value_clip_range, c.value_loss_coef, c.advantage_normalization) == (0.2, 0.6, True)
    assert (c.max_new_tokens, c.temperature, c.top_p, c.top_k) == (256, 0.6, 0.6, None)
    assert (c.num_train_epochs, c.num_turns, c.num_generations, c.discount) == (40, 2, 1, 1.0)
    assert (c.use_separate_critic, c.critic_type, c.eval_interval, c.logging_steps) == (
        True,
        "v",
        16,
        1,
    )
    assert c.train_batch_size == 8 and c.early_termination_threshold is None
    m = MAACConfig()
    assert m.value_clip_range is None and m.critic_learning_rate == 5e-6
    assert not hasattr(m, "use_separate_critic")
