"""The per-phase timer of ``python -m benchmarks.phases``: wrapped functions keep their results
and add their CPU time to their phase; the table's medians skip phases a side does not have."""

from __future__ import annotations

import collections
import types

from benchmarks import phases


def test_a_timed_function_returns_its_value_and_adds_to_its_phase():
    acc: dict = collections.defaultdict(float)
    owner = types.SimpleNamespace(work=lambda n: sum(i * i for i in range(n)))
    phases._timed(owner, "work", "decode", acc)
    assert owner.work(200_000) == sum(i * i for i in range(200_000))
    first = acc["decode"]
    owner.work(200_000)
    assert 0 < first < acc["decode"]


def test_medians_per_phase_and_a_dash_for_a_phase_a_side_lacks():
    runs = [
        {"decode": 1.0, "total": 3.0},
        {"decode": 3.0, "total": 5.0},
        {"decode": 2.0, "total": 4.0},
    ]
    assert phases._median(runs, "decode") == "2.00"
    assert phases._median(runs, "total") == "4.00"
    assert phases._median(runs, "optimizer") == "–"
