"""Every field of the preference configs: valid values construct, invalid ones raise a
ValueError that names the field."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.pbrl import MADPOConfig, MADPOIterConfig, MARLHFConfig, MARLHFIterConfig
from tests.core.real_model_fields import as_kwargs as real_model_kwargs

pos_int = st.integers(1, 1000)
nonneg_int = st.integers(0, 1000)
bad_pos_int = st.one_of(
    st.integers(-1000, 0), st.floats(0.5, 10), st.just(True), st.text(max_size=3)
)
bad_nonneg_int = st.one_of(st.integers(-1000, -1), st.floats(0.5, 10), st.just(False))
opt_pos_int = st.one_of(st.none(), pos_int)
bad_bool = st.one_of(st.integers(0, 1), st.text(max_size=3), st.none())
pos_float = st.floats(1e-6, 10.0)
bad_pos_float = st.one_of(st.floats(-10, 0), st.just(float("nan")), st.just("x"))
opt_str = st.one_of(st.none(), st.just("some/model"))
bad_str = st.sampled_from([3, 1.5, ["a"]])
devices = st.one_of(st.none(), st.just("cpu"), st.just(["cpu"]))
bad_devices = st.sampled_from([[], "not-a-device", 3])


def one(field, strategy, **extra):
    """Kwargs dicts setting ``field`` (plus fixed ``extra`` kwargs)."""
    return strategy.map(lambda v: {**extra, field: v})


def simple(field, valid, invalid, **extra):
    return field, (one(field, valid, **extra), one(field, invalid, **extra))


COMMON = dict(
    [
        simple("num_train_epochs", pos_int, bad_pos_int),
        simple("agent_learning_rate", pos_float, bad_pos_float),
        simple("logging_steps", pos_int, bad_pos_int),
        simple("num_agents", opt_pos_int, bad_pos_int),
        simple(
            "collaboration_mode",
            st.sampled_from(["decentralized", "centralized", "Centralised", "multi_agent"]),
            st.sampled_from(["both", "", 1]),
        ),
        simple(
            "parallel_training",
            st.sampled_from(["none", "NONE", None]),
            st.sampled_from(["auto", "ddp", 3, "mp"]),
        ),
        simple("agent_devices", devices, bad_devices),
        simple("max_new_tokens", pos_int, bad_pos_int),
        simple("temperature", pos_float, bad_pos_float),
        simple("top_p", st.floats(0.01, 1.0), st.one_of(st.floats(-1, 0), st.floats(1.01, 3))),
        simple("top_k", st.one_of(st.none(), nonneg_int), bad_nonneg_int),
        simple("num_turns", st.just(1), st.one_of(st.integers(2, 5), st.integers(-3, 0))),
        simple("discount", st.floats(0, 1), st.one_of(st.floats(-1, -0.01), st.floats(1.01, 3))),
        simple(
            "joint_mode",
            st.sampled_from(["aligned", "align", "ALIGNED"]),
            st.sampled_from(["cross", "product", ""]),
        ),
        simple(
            "early_termination_threshold",
            st.one_of(st.none(), st.floats(-5, 5)),
            st.sampled_from([float("nan"), "high"]),
        ),
        simple("external_prompt_passthrough", st.booleans(), bad_bool),
        simple("eval_interval", nonneg_int, bad_nonneg_int),
        simple("eval_num_samples", nonneg_int, bad_nonneg_int),
        simple("eval_batch_size", pos_int, bad_pos_int),
        simple("rollout_buffer_size", pos_int, bad_pos_int),
        simple("train_batch_size", opt_pos_int, bad_pos_int),
        simple("advantage_normalization", st.booleans(), bad_bool),
        simple("reference_kl_coef", st.floats(0, 5), st.floats(-5, -0.001)),
        simple("reference_kl_estimator", st.sampled_from([None, "k1", "k3"]), st.just("k4")),
        simple("preference_num_candidates", st.integers(2, 200), st.integers(-3, 1)),
        simple("preference_pairs_per_sample", opt_pos_int, bad_pos_int),
        simple("dpo_beta", pos_float, bad_pos_float),
        simple("dpo_nll_coef", st.floats(0, 5), st.floats(-5, -0.001)),
        simple("use_environment_step", st.booleans(), bad_bool),
        simple("environment_steps_per_pair", pos_int, bad_pos_int),
        simple("reference_free", st.booleans(), bad_bool),
        simple("seed", st.one_of(st.none(), nonneg_int), bad_nonneg_int),
        simple("output_dir", st.one_of(st.none(), st.just("runs/x")), bad_str),
        simple("rollout_batch_size", opt_pos_int, bad_pos_int),
        simple("generation_batch_size", opt_pos_int, bad_pos_int),
        simple("logprob_max_tokens", st.one_of(opt_pos_int, st.just("auto")), bad_pos_int),
        simple("max_grad_norm", st.one_of(st.none(), pos_float), st.floats(-5, 0)),
        simple("weight_decay", st.floats(0, 1), st.floats(-1, -0.001)),
        simple(
            "reward_call_mode",
            st.sampled_from(["auto", "batch", "per_sample"]),
            st.just("parallel"),
        ),
        simple("nonfinite_loss", st.sampled_from(["raise", "skip"]), st.just("zero")),
        simple("eval_greedy", st.booleans(), bad_bool),
        simple("eval_at_end", st.booleans(), bad_bool),
        simple("show_eval_sample", st.booleans(), bad_bool),
        simple(
            "log_completions",
            nonneg_int,
            st.one_of(st.integers(-1000, -1), st.floats(0.5, 10), st.text(max_size=3), st.none()),
        ),
        simple(
            "report_to",
            st.sampled_from([None, "jsonl", ["jsonl", "tensorboard"], ["wandb"]]),
            st.sampled_from(["tensorbord", ["jsonl", 3], 5]),
        ),
        simple("preference_loss", st.just("sigmoid"), st.sampled_from(["ipo", "", 3])),
        simple("item_seeded_sampling", st.booleans(), bad_bool),
        simple(
            "decode_fast_path",
            st.sampled_from(["auto", "direct", "compiled", "off", " OFF "]),
            st.sampled_from(["fast", "on", "", None, 1]),
        ),
        simple(
            "distributed_mode",
            st.sampled_from(["auto", "single", "ddp", "DDP"]),
            st.sampled_from(["fsdp", "mpi", ""]),
        ),
        (
            "reference_devices",
            (
                one("reference_devices", devices, reference_free=False),
                one("reference_devices", bad_devices, reference_free=False),
            ),
        ),
        (
            "reference_model_name",
            (
                one("reference_model_name", opt_str, reference_free=False),
                st.one_of(
                    one("reference_model_name", bad_str, reference_free=False),
                    one("reference_model_name", st.just("m"), reference_free=True),
                ),
            ),
        ),
    ]
)
COMMON.update(real_model_kwargs())

MADPO_ONLY = dict(
    [
        simple(
            "advantage_mode",
            st.sampled_from([None, "mean", "raw", "max", "rloo", "MAX"]),
            st.sampled_from(["median", ""]),
        ),
        simple("reference_kl_enabled", st.just(False), st.one_of(st.just(True), bad_bool)),
        simple(
            "dpo_backward",
            st.sampled_from(["auto", "agentwise", "joint", "JOINT"]),
            st.sampled_from(["per_agent", "", None, 1]),
        ),
        (
            "pair_selection",
            (
                st.one_of(
                    one("pair_selection", st.sampled_from(["reward_gap", "random", "RANDOM"])),
                    one("pair_selection", st.just("all"), preference_pairs_per_sample=None),
                ),
                st.one_of(
                    one("pair_selection", st.sampled_from(["best", "comparator_reward"])),
                    one("pair_selection", st.just("all"), preference_pairs_per_sample=4),
                ),
            ),
        ),
    ]
)

RLHF = dict(
    [
        simple(
            "policy_loss",
            st.sampled_from(["reinforce", "ppo", "gspo"]),
            st.sampled_from(["clipped", "", 3]),
        ),
        (
            "rl_algorithm",
            (
                one(
                    "rl_algorithm",
                    st.sampled_from(
                        ["magrpo", "mareinforce", "mareforce", "maremax", "marloo", "iac", "maac"]
                    ),
                ),
                one("rl_algorithm", st.sampled_from(["ppo", "grpo", ""])),
            ),
        ),
        (
            "advantage_mode",
            (
                st.one_of(
                    one("advantage_mode", st.sampled_from([None, "mean"]), rl_algorithm="magrpo"),
                    one("advantage_mode", st.just("raw"), rl_algorithm="mareinforce"),
                    one("advantage_mode", st.just(None), rl_algorithm="iac"),
                ),
                st.one_of(
                    one("advantage_mode", st.sampled_from(["raw", "max"]), rl_algorithm="magrpo"),
                    one("advantage_mode", st.just("mean"), rl_algorithm="maac"),
                    one("advantage_mode", st.just("median")),
                ),
            ),
        ),
        (
            "num_generations",
            (
                st.one_of(
                    one("num_generations", st.integers(2, 16), rl_algorithm="magrpo"),
                    one("num_generations", st.integers(1, 16), rl_algorithm="iac"),
                ),
                st.one_of(
                    one("num_generations", st.integers(-2, 1), rl_algorithm="marloo"),
                    one("num_generations", st.integers(-2, 0), rl_algorithm="maac"),
                ),
            ),
        ),
        simple("reference_kl_enabled", st.booleans(), bad_bool),
        simple("reward_model_name", opt_str, bad_str),
        simple(
            "reward_model_device",
            st.sampled_from([None, "cpu", "cuda:1"]),
            st.sampled_from(["not-a-device", "gpu!"]),
        ),
        simple("reward_learning_rate", pos_float, bad_pos_float),
        simple("reward_num_train_epochs", pos_int, bad_pos_int),
        simple("reward_train_batch_size", pos_int, bad_pos_int),
        simple("reward_max_length", opt_pos_int, bad_pos_int),
        simple("reward_freeze_backbone", st.booleans(), bad_bool),
        simple("reward_pooling", st.sampled_from(["last", "mean"]), st.just("max")),
        simple(
            "reward_heldout_fraction",
            st.floats(0, 0.99),
            st.one_of(st.floats(-1, -0.01), st.floats(1, 3)),
        ),
        simple("reward_model_onpolicy_check", st.booleans(), bad_bool),
        simple(
            "rl_stop_accuracy",
            st.one_of(st.none(), st.floats(0, 1)),
            st.one_of(st.floats(-1, -0.01), st.floats(1.01, 3)),
            reward_model_onpolicy_check=True,
        ),
        simple("critic_model_name", opt_str, bad_str),
        simple("critic_learning_rate", st.one_of(st.none(), pos_float), bad_pos_float),
        simple("critic_devices", devices, bad_devices),
        simple("use_separate_critic", st.booleans(), bad_bool),
        simple("critic_type", st.sampled_from(["v", "q", " V "]), st.sampled_from(["a", "", 1])),
        simple("value_loss_coef", pos_float, bad_pos_float),
        simple("value_clip_range", st.one_of(st.none(), pos_float), st.floats(-1, 0)),
        simple("critic_value_head_hidden_dim", opt_pos_int, bad_pos_int),
        simple("value_head_hidden_dim", opt_pos_int, bad_pos_int),
        simple(
            "rl",
            st.one_of(
                st.none(),
                st.just({}),
                st.just({"policy_loss": "ppo"}),
                st.just({"num_iterations": 2, "advantage_normalization": False}),
            ),
            st.one_of(
                st.sampled_from([3, "ppo", ["policy_loss"]]),
                st.just({"num_turns": 2}),
                st.just({"no_such_field": 1}),
                st.just({"policy_loss": "no_such_loss"}),
            ),
        ),
    ]
)

ITER_PAIR_SELECTION = {
    "pair_selection": (
        st.one_of(
            one("pair_selection", st.sampled_from(["reward_gap", "random", "comparator_reward"])),
            one("pair_selection", st.just("all"), preference_pairs_per_sample=None),
        ),
        st.one_of(
            one("pair_selection", st.sampled_from(["best", "judge"])),
            one("pair_selection", st.just("all"), preference_pairs_per_sample=2),
        ),
    )
}

ITER = dict(
    [
        simple("num_iterations", pos_int, bad_pos_int),
        simple("num_online_iterations", pos_int, bad_pos_int),
        (
            "preference_replay_mode",
            (
                st.one_of(
                    one("preference_replay_mode", st.sampled_from(["current", "latest", "new"])),
                    one(
                        "preference_replay_mode",
                        st.sampled_from(["nearest_k", "last_k"]),
                        preference_replay_k=2,
                    ),
                    one("preference_replay_mode", st.just("all_history")),
                    one(
                        "preference_replay_mode",
                        st.sampled_from(["lambda_decay", "td-lambda"]),
                        preference_replay_lambda=0.5,
                    ),
                ),
                st.one_of(
                    one("preference_replay_mode", st.sampled_from(["fifo", ""])),
                    one("preference_replay_mode", st.just("nearest_k")),
                    one("preference_replay_mode", st.just("lambda_decay")),
                    one("preference_replay_mode", st.just("all_history"), preference_replay_k=2),
                ),
            ),
        ),
        (
            "preference_replay_k",
            (
                st.one_of(
                    one("preference_replay_k", pos_int, preference_replay_mode="nearest_k"),
                    one("preference_replay_k", st.sampled_from([None, 1])),
                ),
                st.one_of(
                    one("preference_replay_k", bad_pos_int, preference_replay_mode="nearest_k"),
                    one("preference_replay_k", st.integers(2, 5)),
                ),
            ),
        ),
        (
            "preference_replay_lambda",
            (
                st.one_of(
                    one(
                        "preference_replay_lambda",
                        st.floats(0, 1),
                        preference_replay_mode="lambda_decay",
                    ),
                    one("preference_replay_lambda", st.none()),
                ),
                st.one_of(
                    one(
                        "preference_replay_lambda",
                        st.floats(1.01, 5),
                        preference_replay_mode="lambda_decay",
                    ),
                    one("preference_replay_lambda", st.floats(0, 1)),
                ),
            ),
        ),
        (
            "preference_replay_sample_size",
            (
                st.one_of(
                    one(
                        "preference_replay_sample_size",
                        opt_pos_int,
                        preference_replay_mode="all_history",
                    ),
                    one("preference_replay_sample_size", st.none()),
                ),
                st.one_of(
                    one(
                        "preference_replay_sample_size",
                        bad_pos_int,
                        preference_replay_mode="all_history",
                    ),
                    one("preference_replay_sample_size", pos_int),
                ),
            ),
        ),
        simple("preference_replay_dir", st.one_of(st.none(), st.just("replay")), bad_str),
        simple("log_reward_distribution", st.booleans(), bad_bool),
        simple("policy_checkpoint_dir", st.one_of(st.none(), st.just("policies")), bad_str),
        (
            "comparator_policy",
            (
                st.one_of(
                    one(
                        "comparator_policy",
                        st.sampled_from(
                            ["current", "self", "current_copy", "copy", "history", "previous"]
                        ),
                    ),
                    one(
                        "comparator_policy",
                        st.sampled_from(["model", "external"]),
                        comparator_model_name="m",
                    ),
                    one(
                        "comparator_policy",
                        st.sampled_from(["api", "http"]),
                        comparator_api_url="http://127.0.0.1:1/v1",
                    ),
                ),
                st.one_of(
                    one("comparator_policy", st.sampled_from(["judge", ""])),
                    one("comparator_policy", st.just("model")),
                    one("comparator_policy", st.just("api")),
                    one("comparator_policy", st.just("current"), comparator_model_name="m"),
                ),
            ),
        ),
        simple(
            "comparator_generation_mode",
            st.sampled_from(["decentralized", "centralized", "single-agent"]),
            st.sampled_from(["hybrid", 2]),
        ),
        (
            "comparator_centralized_agent_index",
            (
                one(
                    "comparator_centralized_agent_index",
                    st.integers(0, 1),
                    comparator_generation_mode="centralized",
                    num_agents=2,
                ),
                st.one_of(
                    one(
                        "comparator_centralized_agent_index",
                        st.integers(2, 9),
                        comparator_generation_mode="centralized",
                        num_agents=2,
                    ),
                    one(
                        "comparator_centralized_agent_index",
                        st.integers(-5, -1),
                        comparator_generation_mode="centralized",
                    ),
                    one(
                        "comparator_centralized_agent_index",
                        st.integers(1, 3),
                        collaboration_mode="centralized",
                    ),
                ),
            ),
        ),
        (
            "comparator_model_name",
            (
                st.one_of(
                    one("comparator_model_name", st.just("m"), comparator_policy="model"),
                    one("comparator_model_name", st.none()),
                ),
                st.one_of(
                    one("comparator_model_name", bad_str, comparator_policy="model"),
                    one("comparator_model_name", st.just("m"), comparator_policy="history"),
                ),
            ),
        ),
        (
            "comparator_agents",
            (
                one(
                    "comparator_agents",
                    st.sampled_from([["a"], ["a", "b"]]),
                    comparator_policy="model",
                ),
                st.one_of(
                    one("comparator_agents", st.sampled_from([[], "a"]), comparator_policy="model"),
                    one("comparator_agents", st.just(["a"]), comparator_policy="current"),
                ),
            ),
        ),
        simple("comparator_devices", devices, bad_devices),
        simple("comparator_num_candidates", opt_pos_int, bad_pos_int),
        (
            "comparator_history_k",
            (
                one("comparator_history_k", opt_pos_int, comparator_policy="history"),
                st.one_of(
                    one("comparator_history_k", bad_pos_int, comparator_policy="history"),
                    one("comparator_history_k", pos_int, comparator_policy="current"),
                ),
            ),
        ),
        simple("comparator_pairing", st.sampled_from(["aligned", "cross"]), st.just("zip")),
        (
            "comparator_api_url",
            (
                st.one_of(
                    one(
                        "comparator_api_url",
                        st.sampled_from(["http://127.0.0.1:8/v1", "https://api.example.com/x"]),
                        comparator_policy="api",
                    ),
                    one("comparator_api_url", st.none()),
                ),
                st.one_of(
                    one(
                        "comparator_api_url",
                        st.sampled_from(["ftp://x", "localhost:8"]),
                        comparator_policy="api",
                    ),
                    one("comparator_api_url", st.just(None), comparator_policy="api"),
                ),
            ),
        ),
        simple(
            "comparator_api_format",
            st.sampled_from(
                [
                    "generic",
                    "openai",
                    "chat",
                    "anthropic",
                    "messages",
                    "responses",
                    "codex",
                    "openai_responses",
                ]
            ),
            st.sampled_from(["grpc", ""]),
        ),
        simple("comparator_api_model", opt_str, bad_str),
        simple("comparator_api_max_n_per_request", opt_pos_int, bad_pos_int),
        simple(
            "comparator_api_timeout", pos_float, st.one_of(st.floats(-5, 0), st.just(float("inf")))
        ),
        simple(
            "comparator_api_headers",
            st.sampled_from([None, {"X-Team": "a"}]),
            st.sampled_from(["x", ["a"]]),
        ),
        simple("comparator_api_key", st.none(), st.text(min_size=1, max_size=8)),
        simple("comparator_api_key_env", st.sampled_from([None, "MY_KEY"]), bad_str),
        simple(
            "comparator_api_key_header",
            st.sampled_from(["Authorization", "X-Key"]),
            st.sampled_from(["", None, 3]),
        ),
        simple("comparator_api_key_prefix", st.sampled_from([None, "Bearer", "Token"]), bad_str),
        simple(
            "comparator_api_response_field",
            st.sampled_from(["completions", "data.out"]),
            st.sampled_from(["", None]),
        ),
        simple(
            "comparator_api_extra_body",
            st.sampled_from([None, {"stop": ["\n"]}]),
            st.sampled_from(["x", [1]]),
        ),
        simple("comparator_api_max_retries", nonneg_int, bad_nonneg_int),
        simple("comparator_api_retry_backoff", st.floats(0, 10), st.floats(-5, -0.01)),
    ]
)

MARLHF_ITER_ONLY = dict(
    [
        simple(
            "preference_scoring_reward",
            st.sampled_from(["task", "oracle", "env", "reward_model", "learned", "model"]),
            st.sampled_from(["judge", ""]),
        ),
        simple("reward_model_warm_start", st.booleans(), bad_bool),
    ]
)

TABLES = {
    MADPOConfig: {**COMMON, **MADPO_ONLY},
    MARLHFConfig: {**COMMON, **MADPO_ONLY, **RLHF},
    MADPOIterConfig: {**COMMON, **MADPO_ONLY, **ITER, **ITER_PAIR_SELECTION},
    MARLHFIterConfig: {
        **COMMON,
        **MADPO_ONLY,
        **RLHF,
        **ITER,
        **ITER_PAIR_SELECTION,
        **MARLHF_ITER_ONLY,
    },
}
CASES = [(cls, field) for cls, table in TABLES.items() for field in sorted(table)]


@pytest.mark.parametrize("cls", list(TABLES), ids=lambda c: c.__name__)
def test_table_covers_every_field(cls):
    assert set(TABLES[cls]) == {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(("cls", "field"), CASES, ids=[f"{c.__name__}.{f}" for c, f in CASES])
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_field_constraints(cls, field, data):
    valid, invalid = TABLES[cls][field]
    cls(**data.draw(valid, label="valid"))
    kwargs = data.draw(invalid, label="invalid")
    with pytest.raises(ValueError) as info:
        cls(**kwargs)
    assert field in str(info.value), f"{cls.__name__}: error does not name {field}: {info.value}"


def test_defaults_match_the_reference():
    madpo = MADPOConfig()
    assert (madpo.preference_num_candidates, madpo.preference_pairs_per_sample) == (80, 16)
    assert (madpo.pair_selection, madpo.dpo_beta, madpo.reference_free) == ("reward_gap", 0.1, True)
    assert madpo.train_batch_size == madpo.rollout_buffer_size == 2
    rlhf = MARLHFConfig()
    assert (rlhf.rl_algorithm, rlhf.advantage_mode, rlhf.reward_model_device) == (
        "magrpo",
        "mean",
        None,
    )
    assert MARLHFConfig(rl_algorithm="mareforce").advantage_mode == "raw"
    assert MARLHFConfig(rl_algorithm="iac").advantage_mode is None
    it = MADPOIterConfig()
    assert (it.num_train_epochs, it.preference_num_candidates, it.pair_selection) == (
        1,
        20,
        "comparator_reward",
    )
    rit = MARLHFIterConfig()
    assert (rit.num_train_epochs, rit.reward_num_train_epochs, rit.preference_scoring_reward) == (
        2,
        2,
        "task",
    )
    assert MADPOIterConfig(comparator_policy="previous").comparator_history_k == 1


def test_centralized_collaboration_forces_centralized_comparators():
    cfg = MADPOIterConfig(
        collaboration_mode="centralized", comparator_generation_mode="decentralized"
    )
    assert cfg.comparator_generation_mode == "centralized"
    assert cfg.actor_count == 1


def test_api_key_literal_is_refused_with_a_pointer_to_the_env_var():
    with pytest.raises(ValueError, match="comparator_api_key_env"):
        MADPOIterConfig(comparator_api_key="sk-secret")
