"""Modules that moved into a subpackage (``comlrl.core.training``, ``comlrl.core.distributed``,
``comlrl.core.models``, ``comlrl.core.placement``, ``comlrl.core.loop``, ``comlrl.core.compat``,
``comlrl.core.algos``, ``comlrl.core.centralized``, ``comlrl.core.commands``)
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


def test_every_former_top_level_module_of_the_regrouping_is_listed():
    regrouped = {
        "adapters": "models.adapters",
        "backbone": "models.backbone",
        "model_setup": "models.setup",
        "reference": "models.reference",
        "forward_api": "models.forward_api",
        "devices": "placement.devices",
        "trainer": "loop.trainer",
        "buffer": "loop.buffer",
        "algorithm": "loop.algorithm",
        "step_cadence": "loop.step_cadence",
        "epoch_order": "loop.epoch_order",
        "timing": "loop.timing",
        "compat_devices": "compat.devices",
        "compat_helpers": "compat.helpers",
        "compat_notices": "compat.notices",
        "compat_reference": "compat.reference",
        "evaluation": "loop.evaluation",
        "policy_losses": "algos.policy_losses",
        "ratio": "algos.ratio",
        "stats": "algos.stats",
        "centralized_layout": "centralized.layout",
        "launch": "commands.launch",
        "plotting": "commands.plotting",
        "run_dir": "commands.run_dir",
    }
    for old, new in regrouped.items():
        assert MOVED_MODULES[f"comlrl.core.{old}"] == f"comlrl.core.{new}"


def test_the_top_level_of_core_is_subpackages_and_a_few_cross_cutting_modules():
    from pathlib import Path

    import comlrl.core

    top = Path(comlrl.core.__file__).parent
    modules = sorted(p.stem for p in top.glob("*.py") if p.stem != "__init__")
    # no former path is back as a top-level file
    assert not {f"comlrl.core.{m}" for m in modules} & set(MOVED_MODULES)
    assert len(modules) <= 15, modules


def test_a_new_home_is_not_itself_a_former_path():
    # a chain (a former path whose target is another former path) would warn twice
    assert not set(MOVED_MODULES.values()) & set(MOVED_MODULES)


def test_the_old_trainer_import_of_a_family_written_for_an_earlier_release(monkeypatch):
    for old in ("comlrl.core.trainer", "comlrl.core.buffer"):
        monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=r"comlrl\.core\.loop\.trainer"):
        from comlrl.core.trainer import TrainerBase
    with pytest.warns(DeprecationWarning, match=r"comlrl\.core\.loop\.buffer"):
        from comlrl.core.buffer import Batch
    from comlrl.core.loop.buffer import Batch as moved_batch
    from comlrl.core.loop.trainer import TrainerBase as moved

    assert TrainerBase is moved and Batch is moved_batch


def test_a_monkeypatch_through_a_former_path_reaches_the_moved_module(monkeypatch):
    import comlrl.core.compat.notices as notices

    # (it warns when the former path is imported first; an earlier import left it bound)
    monkeypatch.setattr("comlrl.core.compat_notices._issued", {"probe"})
    assert notices._issued == {"probe"}


def test_the_agent_workers_keep_their_former_names_in_distributed_ranks():
    from comlrl.core.distributed import ranks
    from comlrl.core.placement import devices

    assert ranks.IndexedWorkers is devices.IndexedWorkers
    assert ranks.current_worker is devices.current_worker


def test_an_unknown_core_module_still_fails_to_import():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("comlrl.core.no_such_module")
