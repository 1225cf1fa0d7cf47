"""Every exported trainer of core, comlrl-reinforce and comlrl-ac offers the
hooks of ``comlrl.core.loop.algorithm.Algorithm``. comlrl-pbrl is covered too (its
trainers subclass TrainerBase); its base counts are reported, not limited, here."""

import inspect

from comlrl.core.loop.algorithm import Algorithm

HOOKS = [
    name
    for name, value in vars(Algorithm).items()
    if not name.startswith("_") and inspect.isfunction(value)
]


def _trainers():
    from comlrl.ac import IACTrainer, MAACTrainer
    from comlrl.core.trainer import TrainerBase
    from comlrl.reinforce import MAGRPOTrainer

    return [TrainerBase, MAGRPOTrainer, IACTrainer, MAACTrainer]


def test_protocol_lists_the_loop_hooks():
    assert set(HOOKS) >= {"num_stages", "prepare", "collect", "update", "end_stage"}


def test_every_trainer_offers_every_hook():
    for cls in _trainers():
        missing = [h for h in HOOKS if not callable(getattr(cls, h, None))]
        assert not missing, (cls.__name__, missing)


def test_loop_reads_no_private_trainer_attribute():
    import ast
    from pathlib import Path

    import comlrl.core.loop.walk as loop

    tree = ast.parse(Path(loop.__file__).read_text())
    private = [
        (node.lineno, node.value.id, node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in {"t", "trainer"}
        and node.attr.startswith("_")
    ]
    assert not private, private


def test_the_walk_writes_run_state_only_through_run_state():
    """The loop sets no trainer attribute: positions, counts and flags go to ``RunState``."""
    import ast
    from pathlib import Path

    import comlrl.core.loop.walk as walk

    tree = ast.parse(Path(walk.__file__).read_text())
    targets = [
        t
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
    ]
    written = [
        (t.lineno, t.value.id, t.attr)
        for t in targets
        if isinstance(t, ast.Attribute)
        and isinstance(t.value, ast.Name)
        and t.value.id in {"t", "trainer"}
    ]
    assert not written, written
    # Writes through the run state do happen (the check above sees attribute stores).
    assert any(
        isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "state"
        for t in targets
    )
