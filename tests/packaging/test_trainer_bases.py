"""Trainer classes stay shallow: no exported trainer class has more than two base classes, and
the core's ``TrainerBase`` inherits nothing (it holds its collaborators instead of mixing them
in), so every family trainer's MRO ends ``TrainerBase, object``.

Base counts cover every family (every ``*Trainer``/``*TrainerBase`` name in their
``__all__``). The preference family has one level more than the others: its iterative trainers
extend MADPO and MARLHF, which share the preference base (DESIGN.md's target is six classes).

The compat shim of a trainer is its re-export under ``comlrl.trainers.*``; those
modules re-export the same class objects, so they add no base class to count.
"""

import importlib

import pytest

from comlrl.core.trainer import TrainerBase

MAX_BASES = 2
COVERED = ["comlrl.reinforce", "comlrl.ac", "comlrl.pbrl"]
# The longest MRO each family's exported trainers may have. With the four mixins TrainerBase
# used to inherit (five classes with CompletionReporting) these were 9 and 15; with its own
# mixins the preference family's was 13.
MAX_MRO = {"comlrl.reinforce": 4, "comlrl.ac": 4, "comlrl.pbrl": 5}


def _exported_trainers(packages):
    for name in packages:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if isinstance(obj, type) and "Trainer" in attr:
                yield name, f"{name}.{attr}", obj


@pytest.mark.parametrize("package,name,cls", list(_exported_trainers(COVERED)))
def test_family_trainer_has_at_most_two_bases(package, name, cls):
    assert len(cls.__bases__) <= MAX_BASES, (name, cls.__bases__)


def test_the_core_trainer_base_inherits_nothing():
    assert TrainerBase.__mro__ == (TrainerBase, object)


@pytest.mark.parametrize("package,name,cls", list(_exported_trainers(MAX_MRO)))
def test_family_trainer_mro_ends_at_the_core_base(package, name, cls):
    mro = cls.__mro__
    assert mro[-2:] == (TrainerBase, object), (name, [c.__name__ for c in mro])
    assert len(mro) <= MAX_MRO[package], (name, [c.__name__ for c in mro])
