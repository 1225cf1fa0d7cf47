"""MARLHF's ``rl:`` section: the RL phase's settings, from Python, YAML and ``--set``; the flat
RL fields are aliases of its keys."""

import pytest

from comlrl.core.commands.launch import algorithm_config
from comlrl.core.config.yaml_io import apply_overrides
from comlrl.pbrl import MARLHFConfig, MARLHFIterConfig, MARLHFTrainer

from .helpers import FAST, PROMPTS, ratio_reward, two_agents


def test_the_rl_section_configures_the_rl_phase(tmp_path):
    agents, tok = two_agents()
    cfg = MARLHFConfig(
        **FAST,
        output_dir=str(tmp_path / "run"),
        rl={"policy_loss": "ppo", "num_iterations": 2, "advantage_normalization": False},
    )
    trainer = MARLHFTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=ratio_reward, args=cfg
    )
    rl = trainer.rl_trainer.args
    assert (rl.policy_loss, rl.num_iterations, rl.advantage_normalization) == ("ppo", 2, False)
    assert cfg.policy_loss == "ppo"  # the flat alias reads the section's value
    assert rl.num_turns == 1 and rl.agent_learning_rate == cfg.agent_learning_rate


def test_flat_fields_still_configure_the_rl_phase(tmp_path):
    agents, tok = two_agents()
    cfg = MARLHFConfig(**FAST, output_dir=str(tmp_path / "run"), policy_loss="gspo")
    trainer = MARLHFTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=ratio_reward, args=cfg
    )
    assert trainer.rl_trainer.args.policy_loss == "gspo"


def test_a_flat_alias_that_agrees_with_the_section_is_accepted():
    cfg = MARLHFConfig(policy_loss="ppo", rl={"policy_loss": "ppo"})
    assert cfg.policy_loss == "ppo" and cfg.rl == {"policy_loss": "ppo"}


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"rl": {"no_such_field": 1}}, r"rl\.no_such_field is not a setting of rl_algorithm="),
        ({"rl": {"num_turns": 2}}, r"rl\.num_turns cannot be set: the RL phase is single-turn"),
        ({"rl": {"num_train_epochs": 2}}, r"rl\.num_train_epochs cannot be set: MARLHF's own"),
        ({"rl": ["policy_loss"]}, r"rl must be None or a mapping"),
        ({"rl": {1: "x"}}, r"rl keys are field names"),
        (
            {"policy_loss": "gspo", "rl": {"policy_loss": "ppo"}},
            r"policy_loss='gspo' and rl\.policy_loss='ppo' disagree",
        ),
        ({"rl": {"policy_loss": "no_such_loss"}}, r"rl\.policy_loss"),
        (
            {"rl_algorithm": "iac", "rl": {"advantage_mode": "mean"}},
            r"rl\.advantage_mode is not a setting of rl_algorithm='iac'",
        ),
    ],
)
def test_bad_rl_sections_name_the_key(values, match):
    with pytest.raises(ValueError, match=match):
        MARLHFConfig(**values)


def test_a_bad_rl_value_names_the_rl_phase(tmp_path):
    agents, tok = two_agents()
    cfg = MARLHFConfig(**FAST, output_dir=str(tmp_path / "run"), rl={"advantage_normalization": 3})
    with pytest.raises(ValueError, match=r"the RL phase's config \(rl_algorithm='magrpo'\)"):
        MARLHFTrainer(
            agents=agents,
            tokenizer=tok,
            train_dataset=PROMPTS[:2],
            reward_func=ratio_reward,
            args=cfg,
        )


def test_run_files_and_set_overrides_take_the_rl_section():
    run = {"marlhf_iter": {"num_iterations": 2, "rl": {"policy_loss": "ppo"}}}
    run = apply_overrides(run, ["marlhf_iter.rl.num_iterations=3"])
    cfg = algorithm_config(run, MARLHFIterConfig, "marlhf_iter")
    assert cfg.num_iterations == 2  # the online iterations; rl.num_iterations is PPO's passes
    assert cfg.rl == {"policy_loss": "ppo", "num_iterations": 3}
    assert cfg.policy_loss == "ppo"


@pytest.mark.parametrize(
    "given, expected",
    [({}, 6), ({"num_iterations": 3}, 3), ({"num_online_iterations": 4}, 4),
     ({"num_iterations": 5, "num_online_iterations": 5}, 5)],
)  # fmt: skip
def test_online_iterations_and_their_earlier_name_are_one_setting(given, expected):
    from comlrl.pbrl import MADPOIterConfig, MARLHFIterConfig

    for cls in (MADPOIterConfig, MARLHFIterConfig):
        cfg = cls(**given)
        assert cfg.num_online_iterations == cfg.num_iterations == expected


def test_online_iterations_and_their_earlier_name_disagreeing_is_an_error():
    from comlrl.pbrl import MADPOIterConfig

    with pytest.raises(ValueError, match="num_iterations=3 and num_online_iterations=4 disagree"):
        MADPOIterConfig(num_iterations=3, num_online_iterations=4)


def test_the_rl_sections_passes_are_not_the_online_iterations(tmp_path):
    from comlrl.pbrl import MARLHFIterConfig

    cfg = MARLHFIterConfig(num_online_iterations=2, rl={"policy_loss": "ppo", "num_iterations": 3})
    assert cfg.num_online_iterations == cfg.num_iterations == 2
    assert cfg.rl == {"policy_loss": "ppo", "num_iterations": 3}
