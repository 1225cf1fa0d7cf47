"""The learning benchmark's catalogue: every run's section is a valid config of its algorithm."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.learning import catalogue
from benchmarks.learning.runfile import run_file

CASES = [(spec, task) for spec in catalogue.RUNS for task in spec.tasks()]


def _build_config(spec, task):
    from comlrl.core.commands.launch import DEFAULT_RUN, algorithm_config
    from comlrl.core.config.run_file import check_run_file
    from comlrl.core.plugins import load_algorithm

    run, _ = run_file(spec, task, seed=0)
    config_cls = load_algorithm(spec.algorithm).default_config_cls

    def build():
        check_run_file(run, DEFAULT_RUN)
        return algorithm_config(run, config_cls, spec.algorithm)

    return config_cls, build


@pytest.mark.parametrize(("spec", "task"), CASES, ids=[f"{s.name}-{t}" for s, t in CASES])
def test_every_section_passes_its_config_validation(spec, task):
    config_cls, build = _build_config(spec, task)
    names = {f.name for f in dataclasses.fields(config_cls)}
    config = build()
    for name, value in spec.section.items():
        if name in names and task == "length_ratio" and not spec.example:
            held = getattr(config, name)
            if isinstance(value, dict):
                # Validation may fill defaults (peft_type, task_type); what was asked must hold.
                assert {k: held.get(k) for k in value} == value, name
            else:
                assert held == value, name


def test_catalogue_covers_every_algorithm_and_names_are_unique():
    from comlrl.core.plugins import available_algorithms

    names = [spec.name for spec in catalogue.RUNS]
    assert len(names) == len(set(names))
    covered = {spec.algorithm for spec in catalogue.RUNS if spec.kind == catalogue.ALGORITHM}
    assert set(available_algorithms()) <= covered
    assert sum(spec.kind == catalogue.UNTRAINED for spec in catalogue.RUNS) == 1


def test_select_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown run name"):
        catalogue.select(["magrpo", "nope"])
    assert [s.name for s in catalogue.select(["marloo", "magrpo"])] == ["magrpo", "marloo"]


def test_menu_rows_run_on_length_ratio_only():
    menu = [spec for spec in catalogue.RUNS if spec.kind == catalogue.MENU]
    assert menu and all(spec.tasks() == ("length_ratio",) for spec in menu)
    assert catalogue.BY_NAME["magrpo"].tasks() == catalogue.TASK_NAMES


def test_credit_rows_run_on_the_credit_task_and_the_untrained_agents_everywhere():
    credit = [spec for spec in catalogue.RUNS if spec.kind == catalogue.CREDIT]
    assert {spec.name for spec in credit} == {
        "credit_shared",
        "credit_cross_mean",
        "credit_counterfactual",
    }
    assert all(spec.tasks() == ("length_credit",) for spec in credit)
    assert catalogue.BY_NAME["untrained"].tasks() == catalogue.ALL_TASKS
    run, _ = run_file(catalogue.BY_NAME["credit_counterfactual"], "length_credit", 0)
    assert run["task"]["name"] == "length_credit"
    assert run["magrpo"]["advantage_mode"] == "counterfactual"


@pytest.mark.parametrize(
    "spec", [s for s in catalogue.DEFAULT_ROWS if s.same_as], ids=lambda s: s.name
)
def test_a_defaults_row_shown_as_another_row_has_that_rows_config(spec):
    _, defaults = _build_config(spec, "length_ratio")
    _, same = _build_config(catalogue.BY_NAME[spec.same_as], "length_ratio")
    assert dataclasses.asdict(defaults()) == dataclasses.asdict(same())


def test_defaults_rows_keep_only_the_demo_fields_the_algorithm_has():
    from benchmarks.learning.runfile import defaults_section
    from comlrl.core.commands.launch import DEFAULT_RUN

    madpo = defaults_section("madpo")
    assert "num_generations" not in madpo  # MAGRPO's K means nothing to MADPO
    assert madpo["num_train_epochs"] == DEFAULT_RUN["magrpo"]["num_train_epochs"]
    run, source = run_file(catalogue.BY_NAME["madpo_defaults"], "length_ratio", 0)
    assert source == "defaults" and run["madpo"] == madpo and "magrpo" not in run
    # an iterative trainer keeps its own epochs per iteration (the demo's 6 are a total)
    assert "num_train_epochs" not in defaults_section("madpo_iter")
    assert defaults_section("madpo_iter")["agent_learning_rate"] == madpo["agent_learning_rate"]
