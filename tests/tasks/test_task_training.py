"""Every task trains for one short MAGRPO run from its example YAML (tiny model, offline)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASK_FILES = ["writing_tldr", "writing_arxiv", "coding", "code_completion", "tool_use", "travel"]
# Keep the runs tiny: one item, two generations, a few new tokens.
TINY = [
    "magrpo.num_train_epochs=1",
    "magrpo.num_generations=2",
    "magrpo.max_new_tokens=4",
    "magrpo.eval_num_samples=1",
    "magrpo.eval_interval=100",
    "magrpo.rollout_buffer_size=1",
    "dataset.train_limit=1",
    "dataset.eval_limit=1",
    "output.save_final_model=false",
    "output.verbose=false",
]


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("name", TASK_FILES)
def test_example_yaml_trains_one_short_run(name, tmp_path):
    from comlrl.core.cli import main

    config = EXAMPLES / f"{name}.yaml"
    assert config.is_file()
    overrides = [*TINY, f"output.base_dir={tmp_path}", f"output.run_name={name}"]
    argv = ["train", "--config", str(config)]
    for item in overrides:
        argv += ["--set", item]
    assert main(argv) == 0
    records = _records(tmp_path / name / "metrics.jsonl")
    rewards = [r["turn_1/reward_mean"] for r in records if "turn_1/reward_mean" in r]
    assert rewards, f"no training reward was logged for {name}"
    assert all(math.isfinite(v) for v in rewards)
    evals = [r for r in records if "eval/turn_1/total" in r]
    assert evals and math.isfinite(evals[0]["eval/turn_1/total"])


def test_coding_example_runs_two_turns_with_level_feedback(tmp_path):
    from comlrl.core.cli import main

    argv = ["train", "--config", str(EXAMPLES / "coding.yaml")]
    for item in [*TINY, "magrpo.num_turns=2", f"output.base_dir={tmp_path}", "output.run_name=mt"]:
        argv += ["--set", item]
    assert main(argv) == 0
    records = _records(tmp_path / "mt" / "metrics.jsonl")
    assert any(math.isfinite(r.get("turn_2/reward_mean", math.nan)) for r in records)
