"""CoMLRL-style scripts run unchanged through the compat path; the CLI and the registry know
IAC and MAAC."""

import runpy
import sys
from pathlib import Path

import pytest

import comlrl.ac
from comlrl.core.cli import main as cli_main
from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.plugins import available_algorithms, load_algorithm

ROOT = Path(__file__).resolve().parents[2]


def _run(monkeypatch, name, *argv):
    monkeypatch.setattr(sys, "argv", [name, *argv])
    runpy.run_path(str(ROOT / "examples" / name), run_name="__main__")


def test_compat_import_paths():
    from comlrl.trainers import IACTrainer as FromMeta
    from comlrl.trainers import MAACConfig as ConfigFromMeta
    from comlrl.trainers.actor_critic import (
        ActorCriticTrainerBase,
        IACConfig,
        IACTrainer,
        MAACConfig,
        MAACTrainer,
        RolloutSample,
    )

    assert IACTrainer is comlrl.ac.IACTrainer is FromMeta
    assert MAACConfig is ConfigFromMeta
    assert issubclass(MAACTrainer, ActorCriticTrainerBase)
    assert IACConfig().use_separate_critic and RolloutSample.__name__ == "RolloutSample"


def test_registry_entry_points():
    assert {"iac", "maac"} <= set(available_algorithms())
    assert load_algorithm("IAC") is comlrl.ac.IACTrainer
    assert load_algorithm("maac") is comlrl.ac.MAACTrainer


def test_iac_script_with_separate_critics(tmp_path, monkeypatch, tiny_dir, capsys):
    out = tmp_path / "iac"
    _run(
        monkeypatch,
        "iac_length_ratio.py",
        "--model",
        tiny_dir,
        "--epochs",
        "1",
        "--items",
        "4",
        "--out",
        str(out),
    )
    assert "saved actors and critics" in capsys.readouterr().out
    recs = read_metrics(out / "metrics.jsonl")
    assert any("agent_1/completion_chars" in r for r in recs)  # its metrics_callback
    assert any("agent_0/critic_loss" in r for r in recs)
    for i in range(2):
        assert (out / "models" / f"agent_{i}" / "critic" / "value_head.pt").exists()


def test_maac_script_with_one_critic_model(tmp_path, monkeypatch, tiny_dir):
    out = tmp_path / "maac"
    _run(
        monkeypatch,
        "maac_length_ratio.py",
        "--model",
        tiny_dir,
        "--epochs",
        "1",
        "--items",
        "4",
        "--out",
        str(out),
    )
    recs = read_metrics(out / "metrics.jsonl")
    assert any("critic/critic_loss" in r for r in recs)
    assert (out / "models" / "critic" / "value_head.pt").exists()
    assert (out / "models" / "agent_1" / "config.json").exists()


def test_cli_trains_iac_from_the_example_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        cli_main(
            [
                "train",
                "--config",
                str(ROOT / "examples" / "iac.yaml"),
                "--set",
                "iac.num_train_epochs=1",
                "--set",
                "dataset.train_limit=2",
                "--set",
                "iac.max_new_tokens=8",
                "--set",
                "iac.eval_interval=0",
                "--set",
                "output.verbose=false",
            ]
        )
        == 0
    )
    run = tmp_path / "runs" / "iac_length_ratio"
    assert any("agent_0/critic_loss" in r for r in read_metrics(run / "metrics.jsonl"))
    assert (run / "agents" / "agent_0" / "critic" / "value_head.pt").exists()


def test_cli_algo_flag_trains_maac(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        cli_main(
            [
                "train",
                "--algo",
                "maac",
                "--set",
                "critic_model.name=tiny",
                "--set",
                "maac.num_train_epochs=1",
                "--set",
                "dataset.train_limit=2",
                "--set",
                "maac.max_new_tokens=8",
                "--set",
                "maac.eval_interval=0",
                "--set",
                "output.run_name=m",
                "--set",
                "output.verbose=false",
            ]
        )
        == 0
    )
    assert (tmp_path / "runs" / "m" / "agents" / "critic" / "value_head.pt").exists()


def test_cli_iac_without_a_critic_says_what_to_set(tmp_path, monkeypatch, tiny_dir):
    # The tiny demo gets a tiny critic automatically; a real agent model needs one named.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="critics must be provided"):
        cli_main(
            [
                "train",
                "--debug",  # the exception itself, not the one-line message
                "--algo",
                "iac",
                "--set",
                "output.run_name=x",
                "--set",
                f"agent_model.name={tiny_dir}",
            ]
        )
