"""docs/architecture.md's unfolded walk of one step per family is what the code does now
(regenerating it, ``python -m benchmarks.walk``, changes nothing), and MAGRPO's step stays as
readable as the architecture issue asks: at most 6 indirections from the unit to
``optimizer.step()``, its objective in at most 2 files."""

from __future__ import annotations

import inspect

from benchmarks import walk


def test_the_architecture_walk_is_current_and_magrpo_reads_top_to_bottom():
    results = walk.walks()
    assert [w.name for w in results] == ["MAGRPO", "IAC", "MADPO"]
    for w in results:
        files = w.walk_files
        # every step reaches the one optimizer step from the loop's unit
        assert files[0] == "comlrl/core/loop/walk.py"
        assert w.hops[-1] == walk.Hop("comlrl/core/training/optim.py", "apply_step")
    magrpo = results[0]
    assert magrpo.indirections <= 6, [h for h in magrpo.hops if h.via]
    assert magrpo.objective == ["comlrl/reinforce/algos.py", "comlrl/core/algos/losses.py"]
    # MAGRPO's update is a loop in its own file over core's pieces
    update = [h for h in magrpo.hops if h.file == "comlrl/reinforce/magrpo.py"]
    assert [h.function for h in update][-2:] == [
        "MAGRPOTrainer.update",
        "MAGRPOTrainer._update_agent",
    ]
    text = walk.DOC.read_text()
    assert walk.updated(text, walk.render(results)) == text, (
        "docs/architecture.md is stale: run `uv run --frozen python -m benchmarks.walk`"
    )


def test_the_rest_of_magrpos_objective_lives_in_its_two_files():
    from comlrl.core.algos import losses
    from comlrl.reinforce import algos

    family = (
        algos.group_advantages,
        algos.normalize_groups,
        algos.batch_normalize,
        algos.row_weights,
        algos.token_mean_total,
    )
    core = (losses.zscore, losses.clipped_surrogate, losses.kl_penalty, losses.token_kl)
    assert {inspect.getsourcefile(f) for f in family} == {inspect.getsourcefile(algos)}
    assert {inspect.getsourcefile(f) for f in core} == {inspect.getsourcefile(losses)}


def test_each_kind_of_indirection_is_told_apart():
    seen = []

    def step():
        from comlrl.core.algos import get

        loss = get("policy_loss", "reinforce", "policy_loss")

        def inner():
            seen.append(loss)

        inner()

    trace = walk.trace("probe", step)
    assert seen and "comlrl/core/algos/registry.py" in trace.files
    core, family = "comlrl/core/rollout/collect.py", "comlrl/reinforce/magrpo.py"
    code = walk.render.__code__
    assert walk._via(code, family, core, set()) == "callback"
    assert walk._via(code, family, "comlrl/core/loop/walk.py", set()) is None
    assert walk._via(code, family, core, {code}) == "registry"
    assert walk._via(step.__code__, family, family, set()) == "closure"

    def lazy():
        yield 1

    assert walk._via(lazy.__code__, core, core, set()) == "generator"
