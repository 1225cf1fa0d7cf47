"""The README's learning numbers are the ones in the results file that the learning check wrote."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_learning_numbers_match_the_results_file():
    results = json.loads((ROOT / "benchmarks" / "results" / "learning_after.json").read_text())
    text = " ".join((ROOT / "README.md").read_text().split())
    paragraph = text[text.index("Learning is unchanged") :]
    paragraph = paragraph[: paragraph.index("Raw numbers")]
    expected = {
        "first quarter of the steps:": results["train_reward_first_quarter"],
        "over the last quarter:": results["train_reward_last_quarter"],
        "(the final one, after the last update, which `eval_at_end` adds):": results[
            "final_eval_reward"
        ],
    }
    for label, value in expected.items():
        match = re.search(re.escape(label) + r" ([0-9.]+)", paragraph)
        assert match, label
        assert match.group(1).rstrip(".") == f"{value:.3f}", (label, match.group(1), value)
    assert f"seed {results['seed']}, {results['logged_train_steps']} logged steps" in paragraph
    assert "benchmarks.learning_check --json benchmarks/results/learning_after.json" in paragraph
