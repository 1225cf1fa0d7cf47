"""One real, tiny run through the learning benchmark's runner."""

from __future__ import annotations

import json

from benchmarks.learning import runner, table


def test_one_tiny_run_writes_one_result_line(tmp_path, capsys, monkeypatch):
    from benchmarks.learning import posthoc

    # two scoring prompts keep the test short; the real benchmark scores all 24
    every = posthoc.length_ratio_items
    monkeypatch.setattr(posthoc, "length_ratio_items", lambda: every()[:2])
    results = tmp_path / "learning.jsonl"
    lines = runner.run_all(
        [("magrpo", "length_ratio", 0)], str(results), 1, "test", max_steps=1, posthoc_samples=1
    )
    written = [json.loads(t) for t in results.read_text().splitlines()]
    assert written == json.loads(json.dumps(lines)) and len(written) == 1
    line = written[0]
    assert line["status"] == "ok", line.get("traceback")
    assert line["max_steps"] == 1 and line["posthoc_samples_per_prompt"] == 1
    assert line["posthoc_samples"] == 2.0  # 2 prompts x 1 sample
    assert 0.0 <= line["posthoc_reward"] <= 1.0
    assert line["logged_train_steps"] >= 1 and line["generated_tokens"] > 0
    assert line["eval_last_quarter"] is not None  # eval_at_end evaluates the finished run
    # the logged curve ends at the tokens the backend generated for training
    assert abs(line["token_curve"][-1][0] - line["generated_tokens"]) <= 1
    assert "[1/1] magrpo length_ratio seed 0: post-hoc" in capsys.readouterr().out
    assert "| magrpo |" in table.render(table.read_results(str(results)))


def test_a_failing_run_is_recorded_not_raised(tmp_path, monkeypatch):
    from benchmarks.learning import worker

    def broken(spec, task, seed):
        raise ValueError("iac: unknown field(s) ['num_iterations']")

    monkeypatch.setattr(worker, "run_file", broken)
    results = tmp_path / "learning.jsonl"
    lines = runner.run_all([("ippo", "length_ratio", 0)], str(results), 1, "test")
    assert lines[0]["status"] == "failed"
    assert lines[0]["error"] == "ValueError: iac: unknown field(s) ['num_iterations']"
    assert json.loads(results.read_text())["status"] == "failed"


def test_jobs_expand_runs_tasks_and_seeds():
    from benchmarks.learning import catalogue

    specs = catalogue.select(["magrpo", "dr_grpo"])
    assert runner.jobs(specs, [0, 1], None) == [
        ("magrpo", "length_ratio", 0),
        ("magrpo", "length_ratio", 1),
        ("magrpo", "coding", 0),
        ("magrpo", "coding", 1),
        ("dr_grpo", "length_ratio", 0),
        ("dr_grpo", "length_ratio", 1),
    ]
    assert runner.jobs(specs, [0], ["coding"]) == [("magrpo", "coding", 0)]
