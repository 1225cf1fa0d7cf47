"""docs/architecture.md's walk of one step per family is what the code does now: regenerating
it (``python -m benchmarks.walk``) changes nothing."""

from __future__ import annotations

from benchmarks import walk


def test_the_architecture_walk_is_current():
    results = walk.walks()
    assert [w.name for w in results] == ["MAGRPO", "IAC", "MADPO"]
    for w in results:
        # every step runs the one update driver and the one optimizer step
        assert (
            "comlrl/core/training/train_step.py" in w.files
            and "comlrl/core/training/optim.py" in w.files
        )
        # every file of the trace is on the walk or inside one of the walk's stages
        assert set(w.inside.values()) <= set(w.walk)
    by_name = {w.name: w for w in results}
    # The architecture issue's targets.
    assert len(by_name["MAGRPO"].walk) <= 12 and len(by_name["MAGRPO"].crossings) <= 6
    # MADPO's step now times its phases through core's timing module directly (the trainer's
    # forward for it is gone), which the walk counts as one more file.
    assert len(by_name["MADPO"].walk) <= 16
    assert len(by_name["IAC"].walk) <= 15
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
    assert steps and "comlrl/core/algos/registry.py" in w.files
    assert all(walk._layer(f) == "core" or f.startswith("comlrl/") for f in w.files)


def test_a_core_file_called_from_the_spine_or_a_family_is_on_the_walk():
    # (outermost first) loop -> family -> core stage -> core internal
    spine, family = "comlrl/core/loop/walk.py", "comlrl/reinforce/magrpo.py"
    stage, internal = "comlrl/core/training/policy_update.py", "comlrl/core/training/train_step.py"
    assert walk._stage_of([spine, family, stage]) is None
    assert walk._stage_of([spine, family, stage, internal]) == stage
    # a family callback inside a stage is read again, and what it calls is on the walk
    assert walk._stage_of([spine, family, stage, family, "comlrl/core/algos/__init__.py"]) is None
