"""Workspace invariants: versions, internal ranges, namespace packaging, import contracts."""

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = ["comlrl-core", "comlrl-reinforce", "comlrl-ac", "comlrl-pbrl", "comlrl-tasks"]


def _pyprojects():
    files = {"comlrl": ROOT / "pyproject.toml"}
    files.update({m: ROOT / "packages" / m / "pyproject.toml" for m in MEMBERS})
    return {name: tomllib.loads(p.read_text()) for name, p in files.items()}


def test_every_member_has_version_readme_changelog():
    for member in MEMBERS:
        base = ROOT / "packages" / member
        assert (base / "README.md").read_text().strip()
        assert "##" in (base / "CHANGELOG.md").read_text()
        data = tomllib.loads((base / "pyproject.toml").read_text())
        assert data["project"]["name"] == member
        assert data["project"]["version"]


def test_internal_ranges_admit_sibling_versions():
    projects = _pyprojects()
    versions = {name: data["project"]["version"] for name, data in projects.items()}
    checked = 0
    for name, data in projects.items():
        deps = list(data["project"].get("dependencies", []))
        for extra in data["project"].get("optional-dependencies", {}).values():
            deps.extend(extra)
        for dep in deps:
            req = Requirement(dep)
            if req.name in versions:
                assert req.specifier != SpecifierSet(), f"{name}: {dep} needs a range"
                assert versions[req.name] in req.specifier, f"{name}: {dep} vs {versions[req.name]}"
                checked += 1
    assert checked >= 5


def test_only_core_ships_the_namespace_init():
    # comlrl-core, which every member depends on, owns comlrl/__init__.py, so comlrl.__version__
    # exists without the meta-package; it must extend __path__ so the other members still load.
    for member in MEMBERS:
        src = ROOT / "packages" / member / "src" / "comlrl"
        assert (src / "__init__.py").exists() == (member == "comlrl-core"), member
        assert not (src / "trainers" / "__init__.py").exists(), member
    init = (ROOT / "packages" / "comlrl-core" / "src" / "comlrl" / "__init__.py").read_text()
    assert "extend_path(__path__, __name__)" in init
    assert not (ROOT / "src" / "comlrl" / "__init__.py").exists()


LINT = """
import importlib.machinery, importlib.util, sys
from pathlib import Path
# import-linter accepts root packages only at the top level or inside a namespace package, but
# comlrl-core's comlrl/__init__.py makes `comlrl` a regular package. That file only extends
# __path__ and reads a version, so register `comlrl` as the namespace its members form.
portions = [str(p) for p in sorted(Path(sys.argv[2]).glob("packages/*/src/comlrl"))]
spec = importlib.machinery.ModuleSpec("comlrl", None, is_package=True)
spec.submodule_search_locations = portions
sys.modules["comlrl"] = importlib.util.module_from_spec(spec)
from importlinter.cli import lint_imports
sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True))
"""


def test_import_contracts_hold():
    proc = subprocess.run(
        [sys.executable, "-c", LINT, str(ROOT / "pyproject.toml"), str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in (
        "core imports no family or tasks",
        "tasks import no algorithm family",
        "families import no tasks",
    ):
        assert f"{name} KEPT" in proc.stdout


@pytest.mark.parametrize(
    "module", ["comlrl.trainers.reinforce", "comlrl.utils", "comlrl.reinforce", "comlrl.core"]
)
def test_compat_modules_import(module):
    __import__(module)


def test_every_magrpo_field_is_documented():
    import dataclasses

    from comlrl.reinforce import MAGRPOConfig

    doc = (ROOT / "docs" / "configuration.md").read_text()
    missing = [f.name for f in dataclasses.fields(MAGRPOConfig) if f"`{f.name}`" not in doc]
    assert missing == []
