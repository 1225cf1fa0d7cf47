"""The preference-family and centralized examples run as documented (shortened)."""

import runpy
import sys
from pathlib import Path

import pytest

from comlrl.core.cli import main as cli_main
from comlrl.core.logging.jsonl import read_metrics

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "madpo": "dpo/loss",
    "madpo_iter": "iter/current_iteration",
    "marlhf": "reward_model/loss",
    "marlhf_iter": "reward_model/accuracy",
    "centralized_magrpo": "centralized/parse_failure_rate",
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_yaml_examples_run_through_the_cli(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    overrides = [
        "dataset.train_limit=2",
        "dataset.eval_limit=1",
        f"{name}.num_train_epochs=1",
        f"{name}.max_new_tokens=6",
        "output.save_final_model=false",
        "output.verbose=false",
    ]
    if name.endswith("_iter"):
        overrides.append(f"{name}.num_iterations=2")
    if name == "centralized_magrpo":
        overrides.append(f"{name}.layout_warmup_steps=2")
    args = ["train", "--config", str(ROOT / "examples" / f"{name}.yaml")]
    for o in overrides:
        args += ["--set", o]
    assert cli_main(args) == 0
    run = next((tmp_path / "runs").iterdir())
    records = read_metrics(run / "metrics.jsonl")
    assert any(EXAMPLES[name] in r for r in records)


@pytest.mark.parametrize(
    ("script", "extra", "expected"),
    [
        ("madpo_length_ratio.py", ["--iterative"], None),
        ("marlhf_length_ratio.py", [], "reward model accuracy"),
        ("centralized_magrpo_length_ratio.py", ["--warmup-steps", "2"], "parse-failure rate"),
    ],
)
def test_scripts_run(tmp_path, monkeypatch, capsys, tiny_dir, script, extra, expected):
    out = tmp_path / "out"
    argv = [script, "--model", tiny_dir, "--epochs", "1", "--items", "2", "--out", str(out), *extra]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(ROOT / "examples" / script), run_name="__main__")
    assert (out / "agents" / "agent_0" / "config.json").exists()
    if expected:
        assert expected in capsys.readouterr().out
