"""The benchmark's peak-RSS reading is the measuring process's own, not its launcher's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.portable.measure import peak_rss_mib

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux procfs")
def test_a_child_launched_by_a_big_parent_reports_its_own_peak():
    ballast = bytearray(400 * 1024 * 1024)  # pages touched, so they count as resident
    ballast[::4096] = b"\x01" * len(ballast[::4096])
    parent = peak_rss_mib()
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "from benchmarks.portable.measure import peak_rss_mib as p; print(p())",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    child_peak = float(child.stdout.strip())
    del ballast
    assert parent > 400
    # the child imports torch (~300 MiB) but never holds the parent's 400 MiB ballast
    assert child_peak < parent - 300
