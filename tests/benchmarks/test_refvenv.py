"""The reference venv is built in a temporary folder and moved into place only when complete:
a failed install leaves nothing behind, and a half-built folder is never taken as a venv."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks import refvenv


def fake_run(fail_install: bool):
    def run(cmd, check):
        if cmd[1:3] == ["-m", "venv"]:
            venv = Path(cmd[3])
            (venv / "bin").mkdir(parents=True)
            (venv / "bin" / "python").write_text("#!/bin/sh\n")
            return
        if fail_install:
            raise subprocess.CalledProcessError(1, cmd)

    return run


def test_a_failed_install_leaves_no_folder(tmp_path):
    target = tmp_path / ".venv-ref"
    with pytest.raises(subprocess.CalledProcessError):
        refvenv.build_venv(target, ["comlrl==1.4.3"], run=fake_run(fail_install=True))
    assert list(tmp_path.iterdir()) == []


def test_a_complete_build_is_moved_into_place_with_its_marker(tmp_path):
    target = tmp_path / ".venv-ref"
    python = refvenv.build_venv(target, ["comlrl==1.4.3"], run=fake_run(fail_install=False))
    assert python == target / "bin" / "python" and python.exists()
    assert refvenv.is_complete(target, ["comlrl==1.4.3"])
    assert not refvenv.is_complete(target, ["comlrl==1.4.2"])
    assert [p.name for p in tmp_path.iterdir()] == [".venv-ref"]


def test_a_failed_rebuild_keeps_the_previous_venv(tmp_path):
    target = tmp_path / ".venv-ref"
    refvenv.build_venv(target, ["a==1"], run=fake_run(fail_install=False))
    with pytest.raises(subprocess.CalledProcessError):
        refvenv.build_venv(target, ["a==2"], run=fake_run(fail_install=True))
    assert refvenv.is_complete(target, ["a==1"])
    assert [p.name for p in tmp_path.iterdir()] == [".venv-ref"]


def test_a_half_built_folder_without_the_marker_is_not_a_venv(tmp_path):
    half = tmp_path / ".venv-ref"
    (half / "bin").mkdir(parents=True)
    (half / "bin" / "python").write_text("")
    assert not refvenv.is_complete(half)
