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
