"""The preference examples carry the settings whose learning docs/preference.md reports.

Each example names a run of benchmarks/pbrl_learning.py; its section must hold every setting of
that run (and the demo's sampling), so the measured table describes what a user runs.
"""

from pathlib import Path

import pytest
import yaml

from benchmarks import pbrl_learning

ROOT = Path(__file__).resolve().parents[2]
# example file -> the benchmark run whose settings it carries
DEMOS = {
    "madpo": "madpo_k24_ref",
    "madpo_iter": "madpo_iter_online_ref",
    "marlhf": "marlhf_stop",
    "marlhf_iter": "marlhf_iter_online",
}


@pytest.mark.parametrize("name", sorted(DEMOS))
def test_example_holds_the_measured_settings(name):
    run = yaml.safe_load((ROOT / "examples" / f"{name}.yaml").read_text())
    algorithm, settings = pbrl_learning.RUNS[DEMOS[name]]
    assert run["algorithm"] == algorithm == name
    section = run[name]
    expected = {**pbrl_learning.SAMPLING, **settings}
    differing = {k: (section.get(k), v) for k, v in expected.items() if section.get(k) != v}
    assert not differing, f"examples/{name}.yaml differs from run {DEMOS[name]}: {differing}"
    assert f"`{DEMOS[name]}`" in (ROOT / "examples" / f"{name}.yaml").read_text()
    assert run["dataset"]["train_limit"] == 16  # the demo's 16 training items
