"""The performance guard's verdict: slower than the base by more than the run-to-run spread
fails, anything inside it passes (rates here are made-up numbers, not timings)."""

from __future__ import annotations

import pytest

from benchmarks import guard
from benchmarks.runner import command, ratios


def test_a_slowdown_inside_the_spread_passes():
    result = guard.verdict(base=[100.0, 90.0, 110.0], here=[95.0, 85.0, 100.0])
    assert result["slowdown"] == pytest.approx(0.05)
    assert result["allowed"] == pytest.approx(0.2)
    assert result["ok"]


def test_a_slowdown_beyond_the_spread_fails():
    result = guard.verdict(base=[100.0, 98.0, 102.0], here=[80.0, 79.0, 81.0])
    assert result["slowdown"] == pytest.approx(0.2)
    assert result["allowed"] == pytest.approx(0.04)
    assert not result["ok"]


def test_faster_always_passes():
    assert guard.verdict(base=[50.0, 50.0], here=[70.0, 70.0])["ok"]


def test_the_guard_needs_two_runs_per_revision(capsys):
    with pytest.raises(SystemExit):
        guard.main(["--repeats", "1"])
    assert "--repeats must be at least 2" in capsys.readouterr().err


def test_ratios_against_trl_carry_their_target():
    side = lambda rate: {"env_steps_per_s": rate, "step_seconds": 1.0, "peak_rss_mib": 1.0}  # noqa: E731
    out = ratios("magrpo_random", "tiny", {"ours": side(90.0), "trl": side(30.0)})
    assert out["speedup_over_trl"] == pytest.approx(3.0)
    assert out["trl_target"] == 2.0 and out["trl_ok"]


def test_the_trl_side_runs_its_driver_in_the_trl_venv(monkeypatch, tmp_path):
    from benchmarks import refvenv

    monkeypatch.setattr(refvenv, "trl_python", lambda: tmp_path / "python")
    cmd = command("trl", "spec.json", None)
    assert cmd[0] == str(tmp_path / "python")
    assert cmd[1].endswith("benchmarks/trl_side.py") and cmd[2] == "spec.json"
