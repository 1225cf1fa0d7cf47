"""CoMLRL core: the shared machinery every algorithm family builds on."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

from comlrl.core.versioning import installed_version

__version__ = installed_version("comlrl-core")

__all__ = ["MOVED_MODULES", "__version__"]

# Modules that moved into a subpackage, by their former import path. Importing the former path
# still works (with a DeprecationWarning) and gives the same module object, so code written
# against an earlier release, and a monkeypatch of either name, keep working.
MOVED_MODULES = {
    **{
        f"comlrl.core.{name}": f"comlrl.core.training.{name}"
        for name in ("train_step", "policy_update", "optim", "schedule", "precision", "dropout")
    },
    **{
        f"comlrl.core.{name}": f"comlrl.core.distributed.{name}"
        for name in ("sharding", "ranks", "gradients")
    },
    **{
        f"comlrl.core.{name}": f"comlrl.core.models.{name}"
        for name in ("adapters", "backbone", "reference", "forward_api")
    },
    "comlrl.core.model_setup": "comlrl.core.models.setup",
    "comlrl.core.devices": "comlrl.core.placement.devices",
    **{
        f"comlrl.core.{name}": f"comlrl.core.loop.{name}"
        for name in (
            "trainer",
            "buffer",
            "algorithm",
            "step_cadence",
            "epoch_order",
            "timing",
            "evaluation",
        )
    },
    **{
        f"comlrl.core.{name}": f"comlrl.core.algos.{name}"
        for name in ("policy_losses", "ratio", "stats")
    },
    "comlrl.core.centralized_layout": "comlrl.core.centralized.layout",
    **{
        f"comlrl.core.{name}": f"comlrl.core.commands.{name}"
        for name in ("launch", "plotting", "run_dir")
    },
    **{
        f"comlrl.core.compat_{name}": f"comlrl.core.compat.{name}"
        for name in ("devices", "helpers", "notices", "reference")
    },
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves a former module path of :data:`MOVED_MODULES` to the module's new home."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = MOVED_MODULES[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}; import it from there.", DeprecationWarning, stacklevel=2
        )
        return importlib.import_module(new)

    def exec_module(self, module) -> None:
        """The module ran when its new path was imported."""


if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())
