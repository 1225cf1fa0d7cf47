"""Variant presets fill only unset fields; explicit conflicting settings and settings that do
nothing in the chosen mode raise, naming the field."""

import dataclasses
import pickle

import pytest

from comlrl.reinforce import MAGRPOConfig, MAReMaxConfig


def test_presets_fill_unset_fields():
    dr = MAGRPOConfig(variant="dr_grpo")
    assert not dr.advantage_normalization and dr.loss_aggregation == "constant"
    pp = MAGRPOConfig(variant="reinforce++")
    assert pp.advantage_normalization and pp.advantage_normalization_scope == "batch"


def test_preset_keeps_fields_it_does_not_set():
    dr = MAGRPOConfig(variant="dr_grpo", advantage_mode="rloo", num_generations=6)
    assert dr.advantage_mode == "rloo" and dr.num_generations == 6


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(variant="dr_grpo", advantage_normalization=True), "advantage_normalization"),
        (dict(variant="dr_grpo", loss_aggregation="sum"), "loss_aggregation"),
        (dict(variant="reinforce_pp", advantage_normalization=False), "advantage_normalization"),
        (
            dict(variant="reinforce_pp", advantage_normalization_scope="group"),
            "advantage_normalization_scope",
        ),
    ],
)
def test_explicit_conflict_with_a_preset_raises(kwargs, field):
    with pytest.raises(ValueError, match=f"{field}=.* conflicts with variant="):
        MAGRPOConfig(**kwargs)


def test_explicit_setting_equal_to_the_preset_is_fine():
    dr = MAGRPOConfig(variant="dr_grpo", advantage_normalization=False)
    assert dr.loss_aggregation == "constant"


def test_replace_and_pickle_keep_a_preset_config_valid():
    dr = MAGRPOConfig(variant="dr_grpo")
    again = dataclasses.replace(dr, seed=3)
    assert again == dataclasses.replace(dr, seed=3) and not again.advantage_normalization
    assert pickle.loads(pickle.dumps(dr)) == dr
    assert MAGRPOConfig(**dataclasses.asdict(dr)) == dr


@pytest.mark.parametrize(
    "cls, kwargs, field",
    [
        (
            MAGRPOConfig,
            dict(advantage_normalization=False, advantage_normalization_scope="batch"),
            "advantage_normalization_scope",
        ),
        (MAGRPOConfig, dict(reference_kl_estimator="k3"), "reference_kl_estimator"),
        (MAReMaxConfig, dict(advantage_mode="mean"), "advantage_mode"),
    ],
)
def test_settings_that_do_nothing_raise(cls, kwargs, field):
    with pytest.raises(ValueError, match=f"{field}=.* has no effect"):
        cls(**kwargs)


def test_defaults_passed_explicitly_are_not_inert():
    # dataclasses.replace passes every field; a default never counts as a setting that acts
    cfg = MAGRPOConfig(advantage_normalization=False, advantage_normalization_scope="group")
    assert cfg.advantage_normalization_scope == "group"
    assert MAReMaxConfig(baseline="max", advantage_mode="max").advantage_mode == "max"
