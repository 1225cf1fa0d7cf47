"""`comlrl eval` and `comlrl plot` on a short `comlrl train` run: eval.json and a table from
the saved agents (a run dir or --agents), a valid PNG with the expected curves, and clear
errors for bad paths."""

import json
import shutil
import sys

import pytest
from matplotlib.image import imread

from comlrl.core.cli import main
from comlrl.core.commands.plotting import plot_runs
from comlrl.core.logging.completions import COMPLETIONS_FILE

# One worker runs the whole module, so the short training run is done once.
pytestmark = pytest.mark.xdist_group("test_eval_plot_cli")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SHORT = [
    "--set",
    "magrpo.num_train_epochs=2",
    "--set",
    "magrpo.max_new_tokens=6",
    "--set",
    "magrpo.num_generations=2",
    "--set",
    "magrpo.rollout_buffer_size=2",
    "--set",
    "magrpo.eval_interval=100",
    "--set",
    "magrpo.eval_num_samples=2",
    "--set",
    "magrpo.log_completions=2",
    "--set",
    "dataset.train_limit=2",
    "--set",
    "dataset.eval_limit=2",
    "--set",
    "output.verbose=false",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    args = ["train", *SHORT, "--set", f"output.base_dir={base}", "--set", "output.run_name=a"]
    assert main(args) == 0
    return base / "a"


def test_train_logs_completions(run_dir):
    rows = [json.loads(x) for x in (run_dir / COMPLETIONS_FILE).read_text().splitlines()]
    assert len(rows) == 4  # two updates, two rows each
    assert all(len(r["completions"]) == 2 and isinstance(r["reward"], float) for r in rows)


def test_eval_of_a_run_dir_writes_eval_json(run_dir, capsys):
    assert main(["eval", str(run_dir), "--samples", "2"]) == 0
    out = capsys.readouterr().out
    result = json.loads((run_dir / "eval.json").read_text())
    assert result["num_items"] == 2 and result["samples"] == 2
    assert result["task"] == {"name": "length_ratio", "options": {}}
    assert [a.rsplit("/", 1)[1] for a in result["agents"]] == ["agent_0", "agent_1"]
    for mode in ("greedy", "sampled"):
        assert 0.0 <= result[mode]["turn_1/reward_mean"] <= 1.0
    best = result["sampled"]["turn_1/best_of_2_reward"]
    assert best >= result["sampled"]["turn_1/reward_mean"] - 1e-9
    assert "turn_1/reward_mean" in out and "sampled (k=2)" in out and "greedy" in out
    assert not (run_dir / "metrics.jsonl.tmp").exists()


def test_eval_of_agent_dirs_equals_eval_of_their_run(run_dir, tmp_path):
    agents = [str(run_dir / "agents" / f"agent_{i}") for i in (0, 1)]
    settings = ["--set", "dataset.eval_limit=2", "--set", "magrpo.max_new_tokens=6"]
    out = tmp_path / "e.json"
    args = ["eval", "--agents", *agents, "--task", "length_ratio", "--samples", "1"]
    assert main([*args, *settings, "--out", str(out)]) == 0
    again = tmp_path / "f.json"
    assert main(["eval", str(run_dir), "--samples", "1", "--out", str(again)]) == 0
    from_dirs, from_run = json.loads(out.read_text()), json.loads(again.read_text())
    assert from_dirs["agents"] == from_run["agents"] and from_dirs["num_items"] == 2
    assert from_dirs["greedy"] == from_run["greedy"]  # greedy decoding: the same episodes


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["eval", "no/such/run"], "RUN_OR_AGENTS"),
        (["eval", "--agents", "no/such/agent"], "--agents"),
        (["eval"], "--agents"),
    ],
)
def test_eval_bad_paths_exit_2_naming_the_argument(args, named, capsys):
    assert main(args) == 2
    assert named in capsys.readouterr().err


def test_eval_of_a_run_without_agents_says_what_to_pass(run_dir, tmp_path, capsys):
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(run_dir / "config.yaml", bare / "config.yaml")
    assert main(["eval", str(bare)]) == 2
    err = capsys.readouterr().err
    assert "agents/" in err and "--agents" in err


def test_plot_writes_a_png_with_the_curves_of_both_runs(run_dir, tmp_path):
    other = tmp_path / "b"
    shutil.copytree(run_dir, other, ignore=shutil.ignore_patterns("agents", "checkpoints"))
    png = tmp_path / "curves.png"
    assert main(["plot", str(run_dir), str(other), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    height, width = imread(png).shape[:2]
    assert height > 200 and width > 400
    fig = plot_runs([run_dir, other])
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["reward per turn", "loss per agent", "timings (s)"]
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels == [
        "a: eval/turn_1/reward_mean",
        "a: turn_1/reward_mean",
        "b: eval/turn_1/reward_mean",
        "b: turn_1/reward_mean",
    ]
    losses = {line.get_label() for line in fig.axes[1].get_lines()}
    assert losses == {f"{r}: agent_{i}/loss" for r in "ab" for i in (0, 1)}
    steps = fig.axes[0].get_lines()[1].get_xdata()
    assert list(steps) == sorted(steps) and len(steps) == 2  # two training records


def test_plot_chosen_metrics_and_unknown_ones(run_dir, tmp_path, capsys):
    fig = plot_runs([run_dir], metrics=["agent_*/grad_norm"])
    assert [line.get_label() for line in fig.axes[0].get_lines()] == [
        "agent_0/grad_norm",
        "agent_1/grad_norm",
    ]
    assert main(["plot", str(run_dir), "--metrics", "nope/*", "--out", str(tmp_path / "x.png")])
    assert "nope/*" in capsys.readouterr().err


def test_plot_of_a_missing_run_and_without_matplotlib(tmp_path, run_dir, monkeypatch, capsys):
    assert main(["plot", str(tmp_path / "missing")]) == 2
    assert "metrics.jsonl" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert main(["plot", str(run_dir), "--out", str(tmp_path / "y.png")]) == 2
    assert "comlrl-core[plot]" in capsys.readouterr().err
