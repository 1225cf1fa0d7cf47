"""The tutorial examples run as documented (shortened)."""

import runpy
import sys
from pathlib import Path

from comlrl.core.cli import main as cli_main
from comlrl.core.logging.jsonl import read_metrics

ROOT = Path(__file__).resolve().parents[2]


def _run(monkeypatch, name, *argv):
    monkeypatch.setattr(sys, "argv", [name, *argv])
    runpy.run_path(str(ROOT / "examples" / name), run_name="__main__")


def test_multi_turn_feedback_example(tmp_path, monkeypatch, tiny_dir):
    out = tmp_path / "mt"
    _run(
        monkeypatch,
        "multi_turn_feedback.py",
        "--model",
        tiny_dir,
        "--epochs",
        "1",
        "--out",
        str(out),
    )
    recs = read_metrics(out / "metrics.jsonl")
    assert any("turn_2/reward_mean" in r for r in recs)


def test_length_ratio_tutorial(tmp_path, monkeypatch, tiny_dir, capsys):
    out = tmp_path / "lr"
    _run(monkeypatch, "length_ratio.py", "--model", tiny_dir, "--epochs", "1", "--out", str(out))
    assert "last quarter" in capsys.readouterr().out
    assert (out / "agents" / "agent_1" / "config.json").exists()


def test_length_ratio_yaml(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        cli_main(
            [
                "train",
                "--config",
                str(ROOT / "examples" / "length_ratio.yaml"),
                "--set",
                "magrpo.num_train_epochs=1",
                "--set",
                "dataset.train_limit=4",
                "--set",
                "output.save_final_model=false",
            ]
        )
        == 0
    )
    assert read_metrics(tmp_path / "runs" / "length_ratio" / "metrics.jsonl")
