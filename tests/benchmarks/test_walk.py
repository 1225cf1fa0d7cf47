"""docs/architecture.md's walk of one step per family is what the code does now: regenerating
it (``python -m benchmarks.walk``) changes nothing."""

from __future__ import annotations

from benchmarks import walk


def test_the_architecture_walk_is_current():
    results = walk.walks()
    assert [w.name for w in results] == ["MAGRPO", "IAC", "MADPO"]
    for w in results:
        # every step runs the one update driver and the one optimizer step
        assert "comlrl/core/train_step.py" in w.files and "comlrl/core/optim.py" in w.files
    text = walk.DOC.read_text()
    assert walk.updated(text, walk.render(results)) == text, (
        "docs/architecture.md is stale: run `uv run --frozen python -m benchmarks.walk`"
    )


def test_a_family_file_and_a_crossing_are_told_apart():
    steps = []

    def step():
        from comlrl.core.algos import available

        steps.append(available("policy_loss"))

    w = walk.trace("probe", step)
    assert steps and "comlrl/core/algos.py" in w.files
    assert all(walk._layer(f) == "core" or f.startswith("comlrl/") for f in w.files)
