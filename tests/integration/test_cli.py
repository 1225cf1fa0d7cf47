"""The ``comlrl`` command: the default demo learns, overrides apply, list shows what's installed."""

import statistics

import pytest
import yaml

from comlrl.core.cli import main
from comlrl.core.logging.jsonl import read_metrics


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "magrpo" in out and "length_ratio" in out


def test_default_demo_learns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        main(["train", "--set", "output.run_name=demo", "--set", "magrpo.num_train_epochs=4"]) == 0
    )
    run = tmp_path / "runs" / "demo"
    assert (run / "config.yaml").exists()
    assert (run / "agents" / "agent_0" / "config.json").exists()
    recs = [r for r in read_metrics(run / "metrics.jsonl") if "turn_1/reward_mean" in r]
    q = max(1, len(recs) // 4)
    first = statistics.mean(r["turn_1/reward_mean"] for r in recs[:q])
    last = statistics.mean(r["turn_1/reward_mean"] for r in recs[-q:])
    assert last > first + 0.15, (first, last)


def test_config_file_overrides_and_algo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "task": "length_ratio",
                "dataset": {"train_limit": 2, "eval_limit": 1},
                "magrpo": {
                    "num_train_epochs": 1,
                    "max_new_tokens": 6,
                    "num_generations": 2,
                    "rollout_buffer_size": 2,
                },
                "output": {"run_name": "cfg", "save_final_model": False},
            }
        )
    )
    assert (
        main(["train", "--config", str(cfg), "--algo", "marloo", "--set", "marloo.num_turns=2"])
        == 0
    )
    saved = yaml.safe_load((tmp_path / "runs" / "cfg" / "config.yaml").read_text())
    assert saved["algorithm"] == "marloo" and saved["marloo"]["num_turns"] == 2
    recs = read_metrics(tmp_path / "runs" / "cfg" / "metrics.jsonl")
    assert any("turn_2/reward_mean" in r for r in recs)


def test_unknown_field_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--set", "magrpo.num_epochs=3"]) == 2
    assert "num_epochs" in capsys.readouterr().err
    with pytest.raises(ValueError, match="num_epochs"):  # --debug: the exception itself
        main(["train", "--debug", "--set", "magrpo.num_epochs=3"])


def test_bad_override_syntax(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--set", "magrpo.num_train_epochs"]) == 2
    assert "key=value" in capsys.readouterr().err


@pytest.mark.parametrize("algo", ["iac", "madpo", "centralized_magrpo"])
def test_any_algorithm_runs_from_the_bare_demo(tmp_path, monkeypatch, algo):
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "train",
                "--algo",
                algo,
                "--set",
                f"output.run_name={algo}",
                "--set",
                "dataset.train_limit=2",
                "--set",
                f"{algo}.num_train_epochs=1",
                "--set",
                "output.save_final_model=false",
            ]
        )
        == 0
    )
    assert read_metrics(tmp_path / "runs" / algo / "metrics.jsonl")
