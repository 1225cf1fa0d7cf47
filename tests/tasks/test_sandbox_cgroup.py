"""The per-run cgroup: where it can be made, what it is given, and that the judge joins it.

The kernel side (``memory.max`` counting shared memory and tmpfs pages) needs a delegated
cgroup v2 hierarchy; these tests check what the sandbox decides and writes, on a directory
laid out like one, and what this machine offers.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from comlrl.tasks.sandbox import ExecJob, TestSnippet, run_job
from comlrl.tasks.sandbox.cgroup import JUDGE_MB, RunCgroup, find_parent
from comlrl.tasks.sandbox.isolation import LAYER_ROLES
from tests.tasks.helpers import fast_limits

JOB = ExecJob(setup="def f():\n    return 1", tests=(TestSnippet("assert f() == 1"),))


def _fake_cgroup(root: Path, controllers: str, enabled: str = "") -> Path:
    root.mkdir()
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text(enabled + "\n")
    return root


def test_this_machine_either_offers_a_run_cgroup_or_says_why():
    parent, why = find_parent(None)
    assert bool(parent) != bool(why)
    if why:
        assert "cgroup" in why and "cgroup" in LAYER_ROLES


def test_a_parent_without_the_controllers_is_refused_with_the_reason(tmp_path):
    parent = _fake_cgroup(tmp_path / "cg", "cpu io")
    found, why = find_parent(str(parent))
    assert found == "" and "memory or pids" in why and "sandbox.cgroup_parent" in why


def test_a_configured_parent_gets_the_controllers_enabled(tmp_path):
    parent = _fake_cgroup(tmp_path / "cg", "cpu memory pids")
    assert find_parent(str(parent)) == (str(parent), "")
    assert (parent / "cgroup.subtree_control").read_text() == "+memory +pids"


def test_a_run_cgroup_gets_its_limits_and_reports_an_oom_kill(tmp_path):
    parent = _fake_cgroup(tmp_path / "cg", "memory pids", "memory pids")
    group = RunCgroup(str(parent), 3 * 1024 * 1024, 9)
    path = Path(group.path)
    assert (path / "memory.max").read_text() == str(3 * 1024 * 1024)
    assert (path / "pids.max").read_text() == "9"
    assert not group.out_of_memory()
    (path / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
    assert group.out_of_memory()


def test_the_judge_joins_the_run_cgroup_before_anything_runs(tmp_path):
    parent = _fake_cgroup(tmp_path / "cg", "memory pids", "memory pids")
    limits = fast_limits(cgroup_parent=str(parent))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = run_job(JOB, limits)
    assert result.passed == 1
    # A real cgroup's files go with it on rmdir; these plain files keep the run's behind.
    [run] = [p for p in parent.iterdir() if p.is_dir()]
    assert (run / "cgroup.procs").read_text() == "0"  # the judge moved itself in
    expected = (limits.memory_mb + limits.disk_mb + JUDGE_MB) * 1024 * 1024
    assert (run / "memory.max").read_text() == str(expected)
    assert (run / "pids.max").read_text() == str(limits.max_processes + 8)


def test_cgroup_parent_is_validated():
    with pytest.raises(ValueError, match="sandbox.cgroup_parent"):
        fast_limits(cgroup_parent="relative/path")
