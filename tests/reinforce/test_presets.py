"""Presets are a constructor (``MAGRPOConfig.preset``): a recipe fills its fields, a passed
field that conflicts with it raises, and settings that do nothing in the chosen mode raise,
naming the field."""

import dataclasses
import pickle

import pytest

from comlrl.core.commands.launch import algorithm_config
from comlrl.reinforce import MAGRPOConfig, MAReMaxConfig


def test_presets_fill_their_fields():
    dr = MAGRPOConfig.preset("dr_grpo")
    assert not dr.advantage_normalization and dr.loss_aggregation == "constant"
    pp = MAGRPOConfig.preset("reinforce++")
    assert pp.advantage_normalization and pp.advantage_normalization_scope == "batch"
    assert MAGRPOConfig.preset("grpo") == MAGRPOConfig()


def test_preset_keeps_fields_it_does_not_set():
    dr = MAGRPOConfig.preset("dr_grpo", advantage_mode="rloo", num_generations=6)
    assert dr.advantage_mode == "rloo" and dr.num_generations == 6
    assert isinstance(MAReMaxConfig.preset("dr_grpo"), MAReMaxConfig)


@pytest.mark.parametrize(
    "name, kwargs, field",
    [
        ("dr_grpo", dict(advantage_normalization=True), "advantage_normalization"),
        ("dr_grpo", dict(loss_aggregation="sum"), "loss_aggregation"),
        ("reinforce_pp", dict(advantage_normalization=False), "advantage_normalization"),
        (
            "reinforce_pp",
            dict(advantage_normalization_scope="group"),
            "advantage_normalization_scope",
        ),
    ],
)
def test_a_field_that_conflicts_with_the_preset_raises(name, kwargs, field):
    with pytest.raises(ValueError, match=f"{field}=.* conflicts with preset '{name}'"):
        MAGRPOConfig.preset(name, **kwargs)


def test_an_unknown_preset_names_the_valid_ones():
    with pytest.raises(ValueError, match="preset must be one of dr_grpo, grpo, reinforce_pp"):
        MAGRPOConfig.preset("ppo")


def test_a_setting_equal_to_the_preset_is_fine():
    dr = MAGRPOConfig.preset("dr_grpo", advantage_normalization=False)
    assert dr.loss_aggregation == "constant"


def test_replace_and_pickle_keep_a_preset_config_valid():
    dr = MAGRPOConfig.preset("dr_grpo")
    again = dataclasses.replace(dr, seed=3)
    assert again.seed == 3 and not again.advantage_normalization
    assert pickle.loads(pickle.dumps(dr)) == dr
    assert MAGRPOConfig(**dataclasses.asdict(dr)) == dr
    gspo = MAGRPOConfig(policy_loss="gspo")
    assert MAGRPOConfig(**dataclasses.asdict(gspo)) == gspo


def test_a_run_file_names_its_preset():
    run = {"magrpo": {"preset": "dr_grpo", "num_generations": 3}}
    cfg = algorithm_config(run, MAGRPOConfig, "magrpo")
    assert cfg.loss_aggregation == "constant" and cfg.num_generations == 3
    with pytest.raises(ValueError, match="conflicts with preset 'dr_grpo'"):
        algorithm_config(
            {"magrpo": {"preset": "dr_grpo", "loss_aggregation": "sum"}}, MAGRPOConfig, "magrpo"
        )


@pytest.mark.parametrize(
    "cls, kwargs, field",
    [
        (
            MAGRPOConfig,
            dict(advantage_normalization=False, advantage_normalization_scope="batch"),
            "advantage_normalization_scope",
        ),
        (MAGRPOConfig, dict(reference_kl_estimator="k3"), "reference_kl_estimator"),
        (MAGRPOConfig, dict(epsilon=0.3), "epsilon"),
    ],
)
def test_settings_that_do_nothing_raise(cls, kwargs, field):
    with pytest.raises(ValueError, match=f"{field}=.* has no effect"):
        cls(**kwargs)


def test_defaults_passed_explicitly_are_not_inert():
    # dataclasses.replace passes every field; a default never counts as a setting that acts
    cfg = MAGRPOConfig(advantage_normalization=False, advantage_normalization_scope="group")
    assert cfg.advantage_normalization_scope == "group"


def test_maremax_picks_its_baseline_by_advantage_mode():
    assert MAReMaxConfig().advantage_mode == "greedy" and MAReMaxConfig().uses_greedy_baseline()
    remax_max = MAReMaxConfig(advantage_mode="max")
    assert not remax_max.uses_greedy_baseline() and not remax_max.advantage_normalization
    assert not MAGRPOConfig().uses_greedy_baseline()
