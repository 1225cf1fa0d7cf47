"""Valid and invalid values of the core config fields every family inherits (real-model,
sampling, data order and rollout-backend fields), for the families' field tables
(tests/reinforce, tests/ac, tests/pbrl): field -> (valid, invalid)."""

from __future__ import annotations

from hypothesis import strategies as st

bad_bool = st.one_of(st.integers(0, 1), st.text(max_size=3), st.none())

FIELDS = {
    "apply_chat_template": (
        st.sampled_from(["auto", True, False, "on", "OFF", ["auto", False]]),
        st.sampled_from(["sometimes", 3, [], ["auto", 2]]),
    ),
    "system_prompt": (
        st.sampled_from([None, "Be brief.", ["a", None]]),
        st.sampled_from([3, [], ["a", 3]]),
    ),
    "gradient_checkpointing": (st.booleans(), bad_bool),
    "bf16": (st.booleans(), bad_bool),
    "lr_scheduler_type": (
        st.sampled_from(["constant", "linear", "cosine", "constant_with_warmup", "inverse_sqrt"]),
        st.sampled_from(["reduce_lr_on_plateau", "linearly", "", 3]),
    ),
    "warmup_steps": (st.integers(0, 100), st.sampled_from([-1, 1.5, True])),
    "warmup_ratio": (st.floats(0.0, 1.0), st.sampled_from([-0.1, 1.5, float("nan"), "x"])),
    "max_steps": (st.one_of(st.none(), st.integers(1, 1000)), st.sampled_from([0, -3, 2.5, True])),
    "peft_config": (
        st.sampled_from([None, {"r": 4}, {"r": 2, "target_modules": ["q_proj"]}]),
        st.sampled_from(["lora", 3, {"r": 2, "not_a_field": 1}]),
    ),
    "shuffle_dataset": (st.booleans(), bad_bool),
    "rollout_backend": (st.just("hf"), st.sampled_from(["nope", 3, None])),
    "rollout_backend_options": (st.none(), st.sampled_from([5, "fast", [1]])),
    "min_p": (
        st.one_of(st.none(), st.floats(0, 1)),
        st.sampled_from([1.5, -0.1, "x", float("nan")]),
    ),
    "repetition_penalty": (
        st.one_of(st.none(), st.floats(0.5, 3)),
        st.sampled_from([0.0, -1.0, "x", float("inf")]),
    ),
    "max_prompt_length": (
        st.one_of(st.none(), st.integers(1, 1000)),
        st.sampled_from([0, -3, 2.5, True]),
    ),
    "steps_unit": (st.sampled_from(["optimizer", "env"]), st.sampled_from(["epoch", "", 3])),
    "eval_steps": (
        st.one_of(st.none(), st.integers(1, 1000)),
        st.sampled_from([0, -3, 2.5, True]),
    ),
    "save_steps": (
        st.one_of(st.none(), st.integers(1, 1000)),
        st.sampled_from([0, -3, 2.5, True]),
    ),
    "monitors": (
        st.sampled_from(
            [None, {}, {"kl_max": 0.5, "stop_on": ["kl"]}, {"enabled": False}, {"window": 3}]
        ),
        st.sampled_from(
            [3, "on", {"kl_mx": 1.0}, {"entropy_min": -1.0}, {"stop_on": ["kl"]}, {"window": 1}]
        ),
    ),
}

# settings a field's values need to be valid at all
EXTRA = {
    "lr_scheduler_type": {"max_steps": 10},
    "warmup_steps": {"lr_scheduler_type": "constant_with_warmup"},
    "warmup_ratio": {"lr_scheduler_type": "linear", "max_steps": 10},
}


def extra(field: str) -> dict:
    """The settings ``field`` is checked with (empty for most fields)."""
    return dict(EXTRA.get(field, {}))


def as_kwargs() -> dict:
    """The table as kwargs strategies: field -> (valid kwargs, invalid kwargs)."""
    return {
        field: tuple(s.map(lambda v, f=field: {**extra(f), f: v}) for s in pair)
        for field, pair in FIELDS.items()
    }
