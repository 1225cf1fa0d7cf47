"""The config reference pages match the fields' metadata, and the metadata is complete."""

import dataclasses
from pathlib import Path

import pytest

from comlrl.core.config.base import CommonConfig
from comlrl.core.config.fields import Check, Integer, Noted, check_of, help_of, knob, retune
from comlrl.core.config.reference import (
    COMMAND,
    documented_classes,
    main,
    render_pages,
    stale_pages,
)

PAGES = Path(__file__).resolve().parents[3] / "docs" / "reference"


def test_committed_pages_match_the_metadata():
    stale = stale_pages(PAGES)
    assert not stale, f"config reference pages are stale: {stale}; run `{COMMAND}`"


def test_every_family_and_algorithm_is_documented():
    classes = documented_classes()
    sections = {name for names in classes.values() for name in names}
    assert {"magrpo", "iac", "maac", "madpo", "marlhf_iter"} <= sections
    assert set(render_pages()) == {"config_reinforce.md", "config_ac.md", "config_pbrl.md"}


def test_every_field_has_a_help_text_and_shared_fields_are_declared_once():
    common = {f.name for f in dataclasses.fields(CommonConfig)}
    for cls in documented_classes():
        for field in dataclasses.fields(cls):
            assert help_of(field), f"{cls.__name__}.{field.name} has no help text"
        assert common <= {f.name for f in dataclasses.fields(cls)}
        for name in common:
            # A family may change a shared field's default, never its help text.
            assert help_of(cls.__dataclass_fields__[name]) == help_of(
                CommonConfig.__dataclass_fields__[name]
            )


def test_a_new_default_keeps_the_inherited_help_and_check():
    @dataclasses.dataclass
    class Tuned(CommonConfig):
        num_train_epochs: int = 7

    field = Tuned.__dataclass_fields__["num_train_epochs"]
    assert field.default == 7
    assert help_of(field) == help_of(CommonConfig.__dataclass_fields__["num_train_epochs"])
    assert isinstance(check_of(field), Check)
    with pytest.raises(ValueError, match="num_train_epochs"):
        Tuned(num_train_epochs=0)
    # The field keeps its place: overriding a default does not reorder the fields.
    assert [f.name for f in dataclasses.fields(Tuned)] == [
        f.name for f in dataclasses.fields(CommonConfig)
    ]


def test_retune_changes_default_and_check_but_not_help():
    @dataclasses.dataclass
    class Short(CommonConfig):
        num_turns: int = retune(1, check=Noted(Integer(1, 1), "one turn only"))

    field = Short.__dataclass_fields__["num_turns"]
    assert help_of(field) == help_of(CommonConfig.__dataclass_fields__["num_turns"])
    assert check_of(field).describe(Short) == "1 ≤ int ≤ 1; one turn only"
    assert Short().num_turns == 1
    with pytest.raises(ValueError, match="num_turns must be <= 1"):
        Short(num_turns=2)
    assert CommonConfig(num_turns=2).num_turns == 2


def test_checks_that_read_other_fields_see_them_checked():
    @dataclasses.dataclass
    class Late(CommonConfig):
        extra: int = knob(3, help="An extra knob.", check=Integer(1))

    cfg = Late(rollout_buffer_size=5)
    assert cfg.train_batch_size == 5
    with pytest.raises(ValueError, match="extra must be >= 1"):
        Late(extra=0)


def test_choices_from_a_callable_follow_the_class():
    from comlrl.pbrl import MADPOConfig

    with pytest.raises(ValueError, match="distributed_mode must be one of"):
        MADPOConfig(distributed_mode="fsdp")
    assert MADPOConfig(distributed_mode="DDP").distributed_mode == "ddp"


def test_knob_refuses_an_empty_help_text():
    with pytest.raises(TypeError, match="help"):
        knob(1, help="  ")


def test_check_mode_reports_a_stale_page(tmp_path, capsys):
    assert main(["--out", str(tmp_path)]) == 0
    assert main(["--out", str(tmp_path), "--check"]) == 0
    page = tmp_path / "config_ac.md"
    page.write_text(page.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    assert main(["--out", str(tmp_path), "--check"]) == 1
    assert COMMAND in capsys.readouterr().err


def test_dataclass_tools_and_the_yaml_path_still_work():
    from comlrl.core.commands.launch import algorithm_config

    for cls, names in documented_classes().items():
        cfg = cls()
        assert cls(**dataclasses.asdict(cfg)) == cfg, cls.__name__
        assert dataclasses.replace(cfg, logging_steps=3).logging_steps == 3
        for name in names:
            run = {name: {"eval_interval": 0}, "agent_model": {"max_length": 32}, "seed": 5}
            built = algorithm_config(run, cls, name)
            assert (built.eval_interval, built.max_new_tokens, built.seed) == (0, 32, 5)
            with pytest.raises(ValueError, match="unknown field"):
                algorithm_config({name: {"distributed_modes": ["ddp"]}}, cls, name)
