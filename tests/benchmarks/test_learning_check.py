"""`python -m benchmarks.learning check` against hand-written published results (no training)."""

from __future__ import annotations

import json

import pytest

from benchmarks.learning import catalogue, check, runner


def _line(run, seed, posthoc, status="ok", **extra):
    line = {"run": run, "task": "length_ratio", "seed": seed, "status": status}
    line["posthoc_reward"] = posthoc
    line.update(extra)
    return line


PUBLISHED = [
    _line("magrpo", 0, 0.70),
    _line("magrpo", 1, 0.97),
    _line("magrpo", 2, 0.86),
    _line("magrpo", 3, 0.99),
    _line("magrpo", 0, 0.10, task="coding"),  # another task: not part of the range
    _line("iac", 0, 0.98),
    _line("iac", 1, 0.5, status="failed"),  # a failed published seed does not widen the range
]


def test_published_range_is_the_rows_min_and_max_on_length_ratio():
    assert check.published_range(PUBLISHED, "magrpo") == (0.70, 0.99)
    assert check.published_range(PUBLISHED, "iac") == (0.98, 0.98)
    assert check.published_range(PUBLISHED, "maac") is None


def test_compare_widens_the_range_by_the_margin():
    new = [
        _line("magrpo", 0, 0.61),  # 0.70 - 0.10 = 0.60: inside
        _line("magrpo", 1, 0.59),  # below 0.60: outside
        _line("iac", 0, 1.0),  # 0.98 + 0.10 = 1.08: inside
        _line("iac", 1, None, status="failed", error="ValueError: boom\ntrace"),
        _line("maac", 0, 0.99),  # no published row
    ]
    verdicts = {(v.run, v.seed): v for v in check.compare(PUBLISHED, new, margin=0.10)}
    assert verdicts["magrpo", 0].ok and verdicts["iac", 0].ok
    assert not verdicts["magrpo", 1].ok
    assert verdicts["magrpo", 1].line() == (
        "magrpo seed 1: post-hoc 0.590 in [0.60, 1.09] (published 0.70–0.99 ± 0.10): FAIL"
    )
    assert (
        not verdicts["iac", 1].ok
        and "the run failed: ValueError: boom" in verdicts["iac", 1].line()
    )
    assert not verdicts["maac", 0].ok and "no published result" in verdicts["maac", 0].line()
    # no margin: the published min itself still passes, a hair below does not
    strict = check.compare(PUBLISHED, [_line("magrpo", 5, 0.70), _line("magrpo", 6, 0.699)], 0.0)
    assert [v.ok for v in strict] == [True, False]


def test_check_command_exits_non_zero_when_a_value_falls_outside(tmp_path, monkeypatch, capsys):
    from benchmarks.learning.__main__ import main

    published = tmp_path / "learning.jsonl"
    published.write_text("".join(json.dumps(line) + "\n" for line in PUBLISHED))
    ran = []

    def fake_run_all(todo, results, workers, command, *rest):
        ran.extend(todo)
        value = {"magrpo": fake_run_all.magrpo, "iac": 0.98}
        lines = [_line(name, seed, value[name]) for name, _, seed in todo]
        with open(results, "a") as fh:
            fh.writelines(json.dumps(line) + "\n" for line in lines)
        return lines

    monkeypatch.setattr(runner, "run_all", fake_run_all)
    argv = ["check", "--results", str(published), "--runs", "magrpo", "iac"]
    fake_run_all.magrpo = 0.9
    kept = tmp_path / "check.jsonl"
    assert main([*argv, "--check-results", str(kept)]) == 0
    assert ran == [(n, "length_ratio", s) for n in ("magrpo", "iac") for s in catalogue.CHECK_SEEDS]
    assert len(kept.read_text().splitlines()) == 4
    assert "check passed" in capsys.readouterr().out
    fake_run_all.magrpo = 0.3
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "check FAILED: 2 of 4 outside the published range" in out
    assert "magrpo seed 0: post-hoc 0.300 in [0.60, 1.09]" in out
    # the published results are never appended to
    assert len(published.read_text().splitlines()) == len(PUBLISHED)
    with pytest.raises(SystemExit, match="no published results"):
        main(["check", "--results", str(tmp_path / "missing.jsonl")])
    with pytest.raises(SystemExit, match="--margin"):
        main([*argv, "--margin", "-1"])


def test_check_subset_covers_every_family_and_has_published_rows():
    families = {catalogue.BY_NAME[name].algorithm for name in catalogue.CHECK_RUNS}
    assert {"magrpo", "iac", "maac"} <= families
    assert {"madpo_iter", "marlhf_iter"} <= families
    assert len(catalogue.CHECK_SEEDS) == 2


def test_full_run_gives_length_ratio_four_seeds_and_the_code_task_two():
    from benchmarks.learning.__main__ import CODE_SEEDS, SEEDS

    assert len(SEEDS) >= 4
    todo = runner.default_jobs(catalogue.select(["magrpo"]), SEEDS, CODE_SEEDS, None)
    assert sorted(s for _, t, s in todo if t == "length_ratio") == list(SEEDS)
    assert sorted(s for _, t, s in todo if t == "coding") == list(CODE_SEEDS)


def test_defaults_rows_cover_every_algorithm_and_aliases_are_not_run_twice():
    from comlrl.core.plugins import available_algorithms

    defaults = {spec.algorithm for spec in catalogue.DEFAULT_ROWS}
    assert set(available_algorithms()) <= defaults
    names = [spec.name for spec in catalogue.select(None)]
    assert "madpo_defaults" in names and "magrpo_defaults" not in names
    # asking for an alias runs the row it equals
    assert [s.name for s in catalogue.select(["magrpo_defaults"])] == ["magrpo"]
    for spec in catalogue.DEFAULT_ROWS:
        if spec.same_as:
            assert catalogue.BY_NAME[spec.same_as].algorithm == spec.algorithm
