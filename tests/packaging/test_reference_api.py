"""Every public module path of CoMLRL 1.4.3 imports here with its public names.

The list lives in one place, tests/packaging/reference_public_api.json: each module with the
names it exported, and the names (or whole modules, ``"*"``) that have no equivalent here, each
with its reason. docs/compatibility.md must name every absent entry.
"""

import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
API = json.loads((Path(__file__).with_name("reference_public_api.json")).read_text())
MODULES = API["modules"]
ABSENT = API["absent"]


def _whole_module_absent(module: str) -> bool:
    return "*" in ABSENT.get(module, {})


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not _whole_module_absent(m)))
def test_reference_module_imports_with_its_names(module):
    mod = importlib.import_module(module)
    absent = ABSENT.get(module, {})
    missing = [n for n in MODULES[module]["names"] if n not in absent and not hasattr(mod, n)]
    assert not missing, f"{module} lacks {missing}"
    # An absent entry that exists after all is a stale claim in the docs.
    stale = [n for n in absent if hasattr(mod, n)]
    assert not stale, f"{module} has {stale}, listed as absent"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _whole_module_absent(m)))
def test_absent_reference_modules_really_are(module):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(module)


def test_the_list_covers_the_reference_paths_named_in_the_docs():
    # The paths users import most; a regenerated list that drops them is wrong.
    for module in [
        "comlrl.trainers.reinforce.magrpo",
        "comlrl.trainers.actor_critic.iac",
        "comlrl.trainers.preference.marlhf",
        "comlrl.utils.checkpoint",
        "comlrl.schedulers",
    ]:
        assert MODULES[module]["names"], module
    for module, names in ABSENT.items():
        assert module in MODULES, module
        assert set(names) - {"*"} <= set(MODULES[module]["names"]), module
        assert all(reason.strip() for reason in names.values()), module


def test_compatibility_page_names_every_absent_entry():
    page = (ROOT / "docs" / "compatibility.md").read_text()
    for module, names in ABSENT.items():
        assert f"`{module}`" in page, module
        for name in names:
            if name != "*":
                assert f"`{name}`" in page, f"{module}.{name}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_module_ships_with_its_owner(module):
    # comlrl-reinforce installed alone must give the reinforce paths, and so on: the module file
    # sits in its owner's source tree.
    if _whole_module_absent(module):
        return
    owner = MODULES[module]["owner"]
    src = ROOT / "src" if owner == "comlrl" else ROOT / "packages" / owner / "src"
    rel = Path(*module.split("."))
    assert (src / rel / "__init__.py").exists() or (src / rel.with_suffix(".py")).exists(), (
        module,
        owner,
    )
