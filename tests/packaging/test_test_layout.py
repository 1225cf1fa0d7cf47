"""The tests mirror the source tree: a test of one of core's subpackages lives in
``tests/core/<subpackage>/``, and only tests of core's top-level modules sit in ``tests/core``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "packages" / "comlrl-core" / "src" / "comlrl" / "core"
TESTS = ROOT / "tests" / "core"


def test_each_core_test_folder_is_a_core_subpackage():
    subpackages = {p.name for p in CORE.iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders and folders <= subpackages, sorted(folders - subpackages)
    for folder in folders:
        assert (TESTS / folder / "__init__.py").exists(), folder


def test_only_top_level_modules_are_tested_at_the_top():
    top = sorted(p.name for p in TESTS.glob("test_*.py"))
    # input_checks.py and errors.py: the checks a trainer runs on what it is given
    assert top == ["test_bad_input.py", "test_day_one_errors.py"], top
