"""``comlrl train`` as a careless or unlucky user meets it: a run started twice, a resume that
does not fit, bad settings, Ctrl-C. Every user error is one line and status 2, a refused run
leaves the disk as it was, and a stopped run says how to continue it."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from comlrl.core.checkpoint.reader import read_checkpoint_metadata
from comlrl.core.cli import main
from comlrl.core.errors import UserError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(REPO, "examples", "length_ratio.yaml")
SMALL = [
    "magrpo.num_generations=2",
    "magrpo.max_new_tokens=8",
    "magrpo.rollout_buffer_size=2",
    "magrpo.eval_interval=0",
    "dataset.train_limit=4",
    "dataset.eval_limit=1",
    "output.verbose=false",
    "output.save_final_model=false",
]


def _train(*extra: str) -> list[str]:
    return ["train", "--config", EXAMPLE, "--override", *SMALL, *extra]


def _snapshot(root) -> dict[str, tuple[int, str]]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            out[os.path.relpath(path, root)] = (os.stat(path).st_mtime_ns, digest)
    return out


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    # Model-loading progress bars share stderr; the error itself is exactly one line.
    lines = [line for line in err.splitlines() if line.startswith("comlrl")]
    assert len(lines) == 1 and lines[0].startswith("comlrl: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_a_second_run_is_refused_untouched_and_resume_still_works(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "length_ratio"
    assert main(_train("--set", "magrpo.num_train_epochs=1")) == 0
    before = _snapshot(run)
    assert "config.yaml" in before and "metrics.jsonl" in before
    capsys.readouterr()

    assert main(_train("--set", "magrpo.num_train_epochs=1")) == 2
    line = _error_line(capsys)
    assert "comlrl train --resume runs/length_ratio" in line
    assert "--set output.run_name=" in line
    assert _snapshot(run) == before  # config.yaml included: not rewritten, not touched

    # A resume that does not fit is refused without touching the run either...
    assert main(["train", "--resume", str(run), "--set", "magrpo.num_generations=3"]) == 2
    assert "num_generations: 2 vs 3" in _error_line(capsys)
    assert _snapshot(run) == before
    # ... and the run still continues, with its own saved settings.
    assert main(_train("--resume", "--set", "magrpo.num_train_epochs=2")) == 0
    assert read_checkpoint_metadata(str(run))["epoch"] == 2


@pytest.mark.parametrize(
    "argv, culprit",
    [
        (["train", "--set", "magrpo.num_epochs=3"], "num_epochs"),
        (["train", "--set", "seed"], "key=value"),
        (["train", "--config", "missing.yaml"], "missing.yaml"),
        (["train", "--algo", "nosuchalgo"], "nosuchalgo"),
        (["train", "--resume", "runs/nothing-here"], "runs/nothing-here"),
        (["train", "--resume"], "no checkpoint found"),
        (["train", "--set", "checkpoint.total_limit=0"], "checkpoint.total_limit"),
    ],
)
def test_user_errors_are_one_line_status_2_and_leave_no_run_dir(
    tmp_path, monkeypatch, capsys, argv, culprit
):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert culprit in _error_line(capsys)
    assert not (tmp_path / "runs").exists() or os.listdir(tmp_path / "runs") == []


def test_the_error_line_keeps_flags_and_negative_numbers_and_drops_bullets(
    tmp_path, monkeypatch, capsys
):
    from comlrl.core.checkpoint import session

    def refuse(self, trainer):  # a library check refusing the run (a user error)
        raise UserError("-1 is not a valid seed; pass --set seed=0 instead:\n- first\n- second")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(session.CheckpointSession, "restore", refuse)
    assert main(["train", "--override", *SMALL, "output.run_name=refused"]) == 2
    line = _error_line(capsys)
    assert "-1 is not a valid seed; pass --set seed=0 instead: first; second" in line


def test_a_run_refused_inside_training_removes_the_dir_it_created(tmp_path, monkeypatch, capsys):
    from comlrl.core.checkpoint import session

    def refuse(self, trainer):  # a library check refusing the run (a user error)
        raise UserError("a check inside train() refused the run")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(session.CheckpointSession, "restore", refuse)
    assert main(["train", "--override", *SMALL, "output.run_name=refused"]) == 2
    assert "refused the run" in _error_line(capsys)
    assert not (tmp_path / "runs" / "refused").exists()
    with pytest.raises(ValueError, match="refused the run"):  # --debug: the traceback
        main(["train", "--debug", "--override", *SMALL, "output.run_name=refused"])


def test_override_takes_several_values_and_mixes_with_set(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--override", *SMALL, "magrpo.num_train_epochs=1", "seed=7"]
    assert main([*argv, "--set", "output.run_name=ov"]) == 0
    saved = yaml.safe_load((tmp_path / "runs" / "ov" / "config.yaml").read_text())
    assert saved["seed"] == 7 and saved["magrpo"]["num_generations"] == 2
    assert saved["output"]["run_name"] == "ov"
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--override KEY=VALUE [KEY=VALUE ...]" in capsys.readouterr().out


def test_sigint_saves_says_how_to_resume_and_exits_nonzero(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    args = [f"--set={item}" for item in SMALL[:-2]]
    cmd = [sys.executable, "-m", "comlrl.core.cli", "train", *args]
    cmd += ["--set=output.run_name=sig", "--set=magrpo.num_train_epochs=500"]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    log = tmp_path / "runs" / "sig" / "metrics.jsonl"
    deadline = time.monotonic() + 900
    while not (log.exists() and log.stat().st_size > 0):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "training never started"
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 130, (out, err)
    assert "continue it with: comlrl train --resume runs/sig" in err
    assert "Traceback" not in err
    meta = read_checkpoint_metadata(str(tmp_path / "runs" / "sig"))
    assert meta["reason"] == "signal"
    # The printed command continues the run (here with an epoch limit it has nearly reached).
    os.chdir(tmp_path)
    try:
        epochs = meta["epoch"] + 1
        assert (
            main(["train", "--resume", "runs/sig", f"--set=magrpo.num_train_epochs={epochs}"]) == 0
        )
    finally:
        os.chdir(REPO)
    assert read_checkpoint_metadata(str(tmp_path / "runs" / "sig"))["epoch"] == epochs
