"""Every exported trainer of core, comlrl-reinforce and comlrl-ac offers the
hooks of ``comlrl.core.algorithm.Algorithm``. comlrl-pbrl is covered too (its
trainers subclass TrainerBase); its base counts are reported, not limited, here."""

import inspect

from comlrl.core.algorithm import Algorithm

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
