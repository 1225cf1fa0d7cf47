"""The learning benchmark's computations and table against hand-written results."""

from __future__ import annotations

import json
import os

import pytest

from benchmarks.learning import measures, table

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quarters_by_hand():
    assert measures.quarters([]) == (None, None)
    assert measures.quarters([0.5]) == (0.5, 0.5)
    # 8 values: quarters of 2
    assert measures.quarters([1, 3, 0, 0, 0, 0, 5, 7]) == (2, 6)
    # 7 values: 7 // 4 = 1 value each
    assert measures.quarters([1, 9, 9, 9, 9, 9, 4]) == (1, 4)


def test_record_tokens_is_rate_times_phase_seconds():
    row = {"throughput/tokens_per_s": 50.0, "timing/generate": 1.5, "timing/update": 0.5}
    assert measures.record_tokens(row) == 100.0
    assert measures.record_tokens({"timing/generate": 1.0}) is None


def test_reward_curve_and_budget_by_hand():
    rows = [
        {"throughput/tokens_per_s": 10.0, "timing/generate": 4.0, "turn_1/reward_mean": 0.2},
        {"throughput/tokens_per_s": 20.0, "timing/generate": 1.0},  # no reward: tokens count
        {"throughput/tokens_per_s": 30.0, "timing/generate": 1.0, "turn_1/reward_mean": 0.5},
        {"eval/turn_1/reward_mean": 0.9},
        {"throughput/tokens_per_s": 5.0, "timing/generate": 2.0, "turn_1/reward_mean": 0.7},
    ]
    curve = measures.reward_curve(rows)
    assert curve == [(40, 0.2), (90, 0.5), (100, 0.7)]
    assert measures.reward_at_budget(curve, 40) == 0.2
    assert measures.reward_at_budget(curve, 41) == 0.5
    assert measures.reward_at_budget(curve, 100) == 0.7
    assert measures.reward_at_budget(curve, 101) is None
    with pytest.raises(ValueError, match="budget"):
        measures.reward_at_budget(curve, 0)


def _line(run, kind, seed, posthoc, curve, **extra):
    base = {
        "run": run,
        "algorithm": "magrpo",
        "kind": kind,
        "task": "length_ratio",
        "seed": seed,
        "status": "ok",
        "posthoc_reward": posthoc,
        "train_first_quarter": 0.4,
        "train_last_quarter": 0.9,
        "train_seconds": 100.0 + seed,
        "train_cpu_seconds": 90.0,
        "generated_tokens": 1000,
        "token_curve": curve,
        "command": "python -m benchmarks.learning",
        "machine": "cpu x",
        "date": "2026-12-01",
        "commit": "abc1234",
    }
    base.update(extra)
    return base


@pytest.fixture
def results_file(tmp_path):
    lines = [
        _line("untrained", "untrained", 0, 0.35, [], train_first_quarter=None),
        _line("magrpo", "algorithm", 0, 0.5, [(500, 0.6), (1000, 0.9)]),
        _line("magrpo", "algorithm", 0, 0.99, [(500, 0.6), (1000, 0.9)]),  # rerun replaces
        _line("magrpo", "algorithm", 1, 0.98, [(400, 0.5), (900, 0.8)]),
        _line("dr_grpo", "menu", 0, 0.97, [(300, 0.7), (1200, 1.0)]),
        {
            "run": "ippo",
            "kind": "menu",
            "task": "length_ratio",
            "seed": 0,
            "status": "failed",
            "error": "ValueError: run file: iac has no key 'num_iterations'",
        },
    ]
    path = tmp_path / "learning.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_read_results_keeps_the_last_line_per_run(results_file):
    results = table.read_results(results_file)
    magrpo0 = [r for r in results if r["run"] == "magrpo" and r["seed"] == 0]
    assert [r["posthoc_reward"] for r in magrpo0] == [0.99]
    assert len(results) == 5


def test_algorithm_table_by_hand(results_file):
    text = table.algorithm_table(table.read_results(results_file), "length_ratio")
    rows = text.splitlines()
    assert rows[0].startswith("| run | seeds | post-hoc reward | per seed |")
    assert rows[2] == "| untrained | 1 | 0.35 | 0: 0.35 | — → 0.90 | — | 100 | 90 | 1000 |  |"
    # mean (min–max) over the two seeds, every seed's value, and the bar on mean and min
    assert rows[3] == (
        "| magrpo | 2 | 0.98 (0.98–0.99) | 0: 0.99, 1: 0.98 | 0.40 (0.40–0.40) → 0.90 (0.90–0.90)"
        " | yes | 100 | 90 | 1000 |  |"
    )
    # the code task has no bar column
    assert "≥ 0.8" not in table.algorithm_table(table.read_results(results_file), "coding")


def test_seed_statistics_by_hand():
    assert table.seed_stats([0.7, None, 0.9, 1.0]) == pytest.approx((0.8667, 0.7, 1.0), abs=1e-4)
    assert table.seed_stats([None]) is None
    assert table.spread([0.70, 0.97, 0.86, 0.99]) == "0.88 (0.70–0.99)"
    assert table.spread([0.5]) == "0.50"
    assert table.spread([]) == "—"


def test_the_bar_reads_the_mean_and_the_min():
    def lines(*values):
        return [{"seed": i, "status": "ok", "posthoc_reward": v} for i, v in enumerate(values)]

    assert table.verdict(lines(0.99, 0.95, 0.9), 0.35) == "yes"
    # a mean above the bar does not hide one seed below it
    assert table.verdict(lines(1.0, 1.0, 1.0, 0.7), 0.35) == "min < 0.8"
    assert table.verdict(lines(0.5, 0.9), 0.35) == "mean < 0.8; min < 0.8"
    assert table.verdict(lines(0.3, 0.9), 0.35) == "mean < 0.8; min < 0.8; min ≤ untrained"
    failed = lines(0.9) + [{"seed": 1, "status": "failed", "error": "boom"}]
    assert table.verdict(failed, 0.35) == "failed"


def test_defaults_table_sets_each_family_beside_its_example_row(tmp_path):
    lines = [
        _line("magrpo", "algorithm", 0, 0.99, []),
        _line("magrpo", "algorithm", 1, 0.97, []),
        _line("madpo", "algorithm", 0, 0.60, []),
        _line("madpo_defaults", "defaults", 0, 0.74, []),
        _line("madpo_defaults", "defaults", 1, 0.70, []),
    ]
    text = table.defaults_table(lines)
    assert "| magrpo (row magrpo) | 0.98 (0.97–0.99) | the same run: 0.98 (0.97–0.99) |" in text
    assert (
        "| madpo (row madpo) | 0.60 | 0.72 (0.70–0.74) | 0: 0.74, 1: 0.70 | mean < 0.8; min < 0.8 |"
        in text
    )
    assert "iac (row" not in text  # no results for it: no row


def test_menu_table_uses_the_smallest_final_token_count(results_file):
    results = table.read_results(results_file)
    included = [r for r in results if r["run"] in ("magrpo", "dr_grpo", "ippo")]
    assert table.common_budget(included) == 900
    text = table.menu_table(results)
    assert "training reward at 900 tokens" in text.splitlines()[0]
    # magrpo: seed 0 passes 900 at 1000 (0.9), seed 1 at 900 (0.8); dr_grpo at 1200 (1.0)
    assert (
        "| magrpo | reference (the demo's MAGRPO) | 2 | 0.98 (0.98–0.99) | 0: 0.99, 1: 0.98 "
        "| 0.85 (0.80–0.90) |" in text
    )
    assert "| dr_grpo | Dr. GRPO preset | 1 | 0.97 | 0: 0.97 | 1.00 |" in text
    assert "| ippo | IAC with 2 clipped passes (IPPO) | 1 | — | 0: failed | — |" in text
    assert "1 of 1: ValueError: run file: iac has no key 'num_iterations'" in text


def test_render_and_replace_block(results_file):
    block = table.render(table.read_results(results_file))
    assert "- commit: `abc1234`" in block and "### Menu options" in block
    page = f"# t\n\nintro\n{table.START}\nold\n{table.END}\n\nafter\n"
    new = table.replace_block(page, block)
    assert table.generated_block(new) == block
    assert new.startswith("# t\n\nintro\n") and new.endswith("\n\nafter\n")
    with pytest.raises(ValueError, match="generated block"):
        table.replace_block("no markers", block)


def test_docs_page_matches_the_committed_results():
    results = os.path.join(REPO, "benchmarks", "results", "learning.jsonl")
    with open(os.path.join(REPO, "docs", "learning.md")) as fh:
        page = fh.read()
    expected = (
        table.render(table.read_results(results)) if os.path.exists(results) else (table.render([]))
    )
    assert table.generated_block(page) == expected, (
        "docs/learning.md is out of date: run `python -m benchmarks.learning table`"
    )


def test_table_command_rewrites_only_the_generated_block(results_file, tmp_path, capsys):
    from benchmarks.learning.__main__ import main

    docs = tmp_path / "learning.md"
    docs.write_text(f"# page\n{table.START}\nstale\n{table.END}\nreading\n")
    assert main(["table", "--results", results_file, "--docs", str(docs)]) == 0
    page = docs.read_text()
    assert table.generated_block(page) == table.render(table.read_results(results_file))
    assert page.startswith("# page\n") and page.endswith("\nreading\n")
    assert main(["--list"]) == 0
    listing = capsys.readouterr().out
    assert "ippo [menu; iac; length_ratio]" in listing
    assert "madpo [algorithm; madpo; length_ratio,coding] (examples/madpo.yaml" in listing


def test_tokens_to_reach_by_hand():
    curve = [(40, 0.2), (90, 0.95), (100, 0.7)]
    assert measures.tokens_to_reach(curve, 0.9) == 90
    assert measures.tokens_to_reach(curve, 0.2) == 40
    assert measures.tokens_to_reach(curve, 0.99) is None


def test_credit_table_reads_the_tokens_each_run_took(tmp_path):
    def credit(run, seed, curve):
        return _line(run, "credit", seed, 1.0, curve, task="length_credit")

    lines = [
        _line("untrained", "untrained", 0, 0.48, [], task="length_credit"),
        _line("untrained", "untrained", 0, 0.35, []),  # another task: not in this table
        credit("credit_shared", 0, [(500, 0.6), (1000, 0.95)]),
        credit("credit_shared", 1, [(400, 0.5), (900, 0.8)]),
        credit("credit_counterfactual", 0, [(300, 0.91), (1200, 1.0)]),
        credit("credit_counterfactual", 1, [(500, 0.92), (1000, 1.0)]),
    ]
    text = table.credit_table(lines)
    rows = text.splitlines()
    assert "tokens to training reward ≥ 0.9" in rows[0]
    assert rows[2].startswith(
        "| untrained | the initial agents, scored without training | 1 | 0.48"
    )
    # shared: seed 0 reaches 0.9 at 1000, seed 1 never; counterfactual at 300 and 500
    assert "| 1000 (1 of 2 seeds) |" in rows[3]
    assert "| 400 (300–500) |" in rows[4]
    assert "### Per-agent credit (length_credit)" in table.render(lines)
