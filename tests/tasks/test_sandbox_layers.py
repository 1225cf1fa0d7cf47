"""Missing isolation layers: named in one warning per process, or refused under ``strict``."""

from __future__ import annotations

import warnings

import pytest

import comlrl.tasks.sandbox.isolation as isolation
import comlrl.tasks.sandbox.runner as runner
from comlrl.core.task import TaskSpec
from comlrl.tasks.coding.task import TASK as CODING
from comlrl.tasks.completion.task import TASK as COMPLETION
from comlrl.tasks.sandbox import ExecJob, SandboxError, SandboxLimits, TestSnippet, run_job
from comlrl.tasks.sandbox.cgroup import find_parent
from tests.tasks.helpers import FAST_LIMITS, fast_limits

JOB = ExecJob(setup="def f():\n    return 1", tests=(TestSnippet("assert f() == 1"),))


def _this_machine() -> isolation.Plan:
    return isolation.probe_layers(True, True)


def _missing_here() -> dict:
    """What this machine lacks: the probe's findings and, parent-side, the run cgroup."""
    missing = dict(_this_machine().missing)
    why = find_parent(None)[1]
    return {**missing, "cgroup": why} if why else missing


@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(isolation, "_warned", set())


@pytest.fixture
def os_without_layers(monkeypatch, fresh_warnings):
    """Pretend the OS has neither user namespaces nor Landlock."""
    missing = {"namespaces": "no user namespaces", "hide_tree": "needs the namespaces"}
    missing["landlock"] = "this kernel has no Landlock"
    plan = isolation.Plan((), {"hide_tree": False, "privileges": False, "landlock": False}, missing)
    monkeypatch.setattr(isolation, "probe_layers", lambda namespaces, landlock: plan)
    return plan


def test_this_machine_applies_every_layer_or_warns_about_it(fresh_warnings):
    missing = _missing_here()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_job(JOB, fast_limits())
    assert result.passed == 1
    named = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    if missing:
        assert len(named) == 1 and all(f"[{layer}:" in named[0] for layer in missing)
    else:
        assert named == []
        assert result.layers["hide_tree"] and result.layers["privileges"]
        assert result.layers["landlock"] >= 1 and result.layers["namespaces"]


def test_missing_layers_are_named_in_one_warning(os_without_layers):
    with pytest.warns(RuntimeWarning) as caught:
        first = run_job(JOB, fast_limits())
    message = str(caught[0].message)
    for layer in ("namespaces", "hide_tree", "landlock"):
        assert f"[{layer}:" in message
    assert first.passed == 1 and first.layers["python_guard"] is True
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        second = run_job(JOB, fast_limits())  # the same gap is not warned about again
    assert second.passed == 1


def test_strict_refuses_before_any_code_runs(os_without_layers, monkeypatch):
    started = []
    monkeypatch.setattr(runner.subprocess, "Popen", lambda *a, **k: started.append(a))
    with pytest.raises(SandboxError, match="strict") as caught:
        run_job(JOB, fast_limits(strict=True))
    assert "[landlock:" in str(caught.value) and "[hide_tree:" in str(caught.value)
    assert started == []


def test_strict_runs_when_every_required_layer_is_there(fresh_warnings):
    # The run cgroup is not required: seccomp's refusals stand in for it.
    if set(_missing_here()) - isolation.NOT_REQUIRED:
        with pytest.raises(SandboxError, match="strict"):
            run_job(JOB, fast_limits(strict=True))
    else:
        assert run_job(JOB, fast_limits(strict=True)).passed == 1


def test_strict_without_a_run_cgroup_still_runs_and_warns(monkeypatch, fresh_warnings):
    if _this_machine().missing:
        pytest.skip(f"this machine lacks required layers: {sorted(_this_machine().missing)}")
    monkeypatch.setattr(isolation, "find_parent", lambda parent: ("", "no cgroup v2 here"))
    with pytest.warns(RuntimeWarning, match=r"\[cgroup: no cgroup v2 here\]"):
        result = run_job(JOB, fast_limits(strict=True, cgroup_parent="/nowhere"))
    assert result.passed == 1


def test_strict_with_a_layer_turned_off_is_a_config_error():
    with pytest.raises(ValueError, match="sandbox.strict"):
        SandboxLimits(strict=True, landlock=False)
    with pytest.raises(ValueError, match="sandbox.disk_mb"):
        SandboxLimits(disk_mb=0)


@pytest.mark.parametrize("task", [CODING, COMPLETION], ids=["coding", "code_completion"])
def test_strict_is_reachable_from_the_task_options(task):
    options = {"sandbox": {**FAST_LIMITS, "strict": True, "disk_mb": 32}}
    bundle = task.build(TaskSpec(options=options))
    limits = bundle.reward_func.scorer.pool.limits
    assert limits.strict is True and limits.disk_mb == 32
