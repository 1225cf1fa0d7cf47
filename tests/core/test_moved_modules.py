"""Modules that moved into a subpackage (``comlrl.core.training``, ``comlrl.core.distributed``)
still import under their former paths."""

from __future__ import annotations

import importlib
import sys

import pytest

from comlrl.core import MOVED_MODULES


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_a_former_path_gives_the_moved_module_itself(old, monkeypatch):
    new = importlib.import_module(MOVED_MODULES[old])
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=MOVED_MODULES[old].replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is new


def test_the_old_step_import_of_a_family_written_for_an_earlier_release(monkeypatch):
    monkeypatch.delitem(sys.modules, "comlrl.core.train_step", raising=False)
    with pytest.warns(DeprecationWarning):
        from comlrl.core.train_step import train_step
    from comlrl.core.training.train_step import train_step as moved

    assert train_step is moved


def test_an_unknown_core_module_still_fails_to_import():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("comlrl.core.no_such_module")
