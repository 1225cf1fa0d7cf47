"""No exported trainer class has more than two base classes.

Covered packages: comlrl-reinforce and comlrl-ac (every ``*Trainer``/
``*TrainerBase`` name in their ``__all__``). Not covered yet, because they do not hold:
comlrl-core's ``TrainerBase`` (four mixin bases until its reporting, resumable state and
gradient sync become services) and comlrl-pbrl, whose trainers still compose mixins.

The compat shim of a trainer is its re-export under ``comlrl.trainers.*``; those
modules re-export the same class objects, so they add no base class to count.
"""

import importlib

import pytest

MAX_BASES = 2
COVERED = ["comlrl.reinforce", "comlrl.ac"]


def _exported_trainers():
    for name in COVERED:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if isinstance(obj, type) and "Trainer" in attr:
                yield f"{name}.{attr}", obj


@pytest.mark.parametrize("name,cls", list(_exported_trainers()))
def test_family_trainer_has_at_most_two_bases(name, cls):
    assert len(cls.__bases__) <= MAX_BASES, (name, cls.__bases__)
