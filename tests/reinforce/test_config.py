"""Every MAGRPOConfig field: valid values construct, invalid ones raise naming the field."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.reinforce import MAGRPOConfig, MAREINFORCEConfig, MAReMaxConfig, MARLOOConfig
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

# field -> (valid strategy, invalid strategy)
FIELDS = {
    "num_train_epochs": (pos_int, bad_pos_int),
    "agent_learning_rate": (
        st.floats(1e-9, 1.0),
        st.one_of(st.floats(-1, 0), st.just(float("nan"))),
    ),
    "logging_steps": (pos_int, bad_pos_int),
    "num_agents": (opt_pos_int, bad_pos_int),
    "parallel_training": (
        st.sampled_from(["none", "NONE", " null ", None]),
        st.sampled_from(["auto", "ddp", "x", 3]),
    ),
    "num_generations": (st.integers(2, 64), st.one_of(st.integers(-5, 1), st.just(2.5))),
    "max_new_tokens": (pos_int, bad_pos_int),
    "temperature": (st.floats(0.01, 5.0), st.one_of(st.floats(-5, 0), st.just(float("inf")))),
    "top_p": (st.floats(0.01, 1.0), st.one_of(st.floats(-1, 0), st.floats(1.01, 5))),
    "top_k": (st.one_of(st.none(), nonneg_int), bad_nonneg_int),
    "num_turns": (pos_int.filter(lambda x: x <= 5), bad_pos_int),
    "discount": (st.floats(0.0, 1.0), st.one_of(st.floats(-1, -0.01), st.floats(1.01, 3))),
    "joint_mode": (
        st.sampled_from(["aligned", "align", "cross", "crossed", "CROSS"]),
        st.sampled_from(["product", "", "both"]),
    ),
    "early_termination_threshold": (
        st.one_of(st.none(), st.floats(-10, 10)),
        st.sampled_from([float("nan"), "high"]),
    ),
    "external_prompt_passthrough": (st.booleans(), bad_bool),
    "eval_interval": (nonneg_int, bad_nonneg_int),
    "eval_num_samples": (nonneg_int, bad_nonneg_int),
    "eval_batch_size": (pos_int, bad_pos_int),
    "rollout_buffer_size": (pos_int, bad_pos_int),
    "train_batch_size": (opt_pos_int, bad_pos_int),
    "advantage_normalization": (st.booleans(), bad_bool),
    "advantage_mode": (
        st.sampled_from(["mean", "raw", "max", "rloo", "MEAN"]),
        st.sampled_from(["median", "", "gae"]),
    ),
    "reference_kl_enabled": (st.booleans(), bad_bool),
    "reference_kl_coef": (st.floats(0, 10), st.floats(-10, -0.001)),
    "reference_kl_estimator": (st.sampled_from([None, "k1", "k2", "k3"]), st.just("k4")),
    "beta": (st.floats(0, 1), st.floats(-1, -0.001)),
    "num_iterations": (pos_int, bad_pos_int),
    "reward_weights": (
        st.one_of(st.none(), st.lists(st.floats(-5, 5), min_size=1, max_size=3)),
        st.sampled_from([[], [float("nan")], ["a"], 2.0]),
    ),
    "mask_truncated_completions": (st.booleans(), bad_bool),
    "drop_zero_variance_groups": (st.booleans(), bad_bool),
    "epsilon": (st.floats(0.01, 0.99), st.sampled_from([0.0, 1.0, -0.1])),
    "epsilon_high": (st.one_of(st.none(), st.floats(0.01, 5)), st.sampled_from([0.0, -0.2])),
    "clip_ratio_c": (
        st.one_of(st.none(), st.floats(1.01, 10)),
        st.sampled_from([1.0, 0.5, -3.0, float("nan")]),
    ),
    "reference_devices": (devices, st.just([])),
    "agent_devices": (devices, st.just([])),
    "seed": (st.one_of(st.none(), nonneg_int), bad_nonneg_int),
    "output_dir": (st.one_of(st.none(), st.just("runs/x")), st.just(3)),
    "rollout_batch_size": (opt_pos_int, bad_pos_int),
    "generation_batch_size": (opt_pos_int, bad_pos_int),
    "logprob_max_tokens": (st.one_of(opt_pos_int, st.just("auto")), bad_pos_int),
    "advantage_normalization_scope": (st.sampled_from(["group", "batch"]), st.just("global")),
    "loss_aggregation": (
        st.sampled_from(
            ["sum", "none", "sequence_mean", "token_mean", "constant", "grpo", "dapo", "dr_grpo"]
        ),
        st.sampled_from(["mean", "cispo", 3]),
    ),
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
    "policy_loss": (st.just("reinforce"), st.sampled_from(["ppo_clipped", "", 3])),
    **REAL_MODEL_FIELDS,
}


def _extra(field):
    # reference_devices is only checked when the KL term is on
    if field == "reference_devices":
        return {"reference_kl_enabled": True, "num_agents": 2}
    # the estimator does something only with a KL term on
    if field in ("num_iterations", "epsilon", "epsilon_high", "clip_ratio_c"):
        return {"policy_loss": "ppo"}  # they act only with a ratio loss
    if field == "reference_kl_estimator":
        return {"reference_kl_enabled": True}
    return real_model_extra(field)


def test_table_covers_every_field():
    assert set(FIELDS) == {f.name for f in dataclasses.fields(MAGRPOConfig)}


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_field_constraints(field):
    valid, invalid = FIELDS[field]

    @settings(max_examples=15, deadline=None)
    @given(valid)
    def check_valid(value):
        MAGRPOConfig(**{field: value, **_extra(field)})

    @settings(max_examples=15, deadline=None)
    @given(invalid)
    def check_invalid(value):
        with pytest.raises(ValueError, match=field):
            MAGRPOConfig(**{field: value, **_extra(field)})

    check_valid()
    check_invalid()


def test_mp_requires_devices():
    with pytest.raises(ValueError, match="agent_devices"):
        MAGRPOConfig(parallel_training="mp")
    assert (
        MAGRPOConfig(parallel_training="MP", agent_devices=["cpu", "cpu"]).parallel_training == "mp"
    )


def test_agent_devices_length_checked_against_num_agents():
    with pytest.raises(ValueError, match="agent_devices length"):
        MAGRPOConfig(num_agents=3, parallel_training="mp", agent_devices=["cpu", "cpu"])


def test_defaults_match_reference():
    c = MAGRPOConfig()
    assert (c.num_train_epochs, c.agent_learning_rate, c.num_generations, c.max_new_tokens) == (
        20,
        5e-6,
        4,
        256,
    )
    assert (c.temperature, c.top_p, c.top_k, c.num_turns, c.rollout_buffer_size) == (
        0.6,
        0.6,
        50,
        2,
        2,
    )
    assert c.train_batch_size == c.rollout_buffer_size
    assert c.joint_mode == "aligned" and c.advantage_mode == "mean"


def test_variant_configs_pick_their_mode():
    assert MAREINFORCEConfig().advantage_mode == "raw"
    assert MARLOOConfig().advantage_mode == "rloo"
    assert MAReMaxConfig().advantage_mode == "greedy"


@pytest.mark.parametrize(
    "trl, ours",
    [
        ("grpo", "sequence_mean"),
        ("bnpo", "token_mean"),
        ("dapo", "token_mean"),
        ("dr_grpo", "constant"),
    ],
)
def test_trl_loss_type_names_are_values_of_the_one_field(trl, ours):
    assert MAGRPOConfig(loss_aggregation=trl).loss_aggregation == ours
    assert not any(f.name == "loss_type" for f in dataclasses.fields(MAGRPOConfig))


def test_aliases_normalized():
    assert MAGRPOConfig(joint_mode="crossed").joint_mode == "cross"
    assert MAGRPOConfig(joint_mode="align").joint_mode == "aligned"
