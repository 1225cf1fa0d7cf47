"""Stand-ins for the reference's internal names that its test modules import at import time.

Some reference test modules import 1.4.3 internals (its checkpoint encoding, its checkpoint
mixin) at the top, so without them the whole module fails to import and none of its tests runs,
although many of them use only the public API. The names listed in the classification's
``stubs`` section (``COMLRL_REFSUITE_STUBS`` names the JSON file) are therefore installed as
stand-ins before the tests are collected: a module that does not exist here becomes a module of
stand-ins, and a missing name of a module that exists becomes a stand-in attribute of it. Names
that exist are never replaced.

A stand-in can be imported, subclassed and passed around, but using it (calling it, building an
instance of it or of a subclass, reading an attribute, using it as a value in an operation)
raises :class:`InternalNameUsed` and records the use, so each test says whether it needed an
internal name (:data:`TOUCHED`, which the recording plugin reports per test).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import types

import pytest

_PATH = os.environ.get("COMLRL_REFSUITE_STUBS")
# The stand-ins used since the current test began (cleared before each test).
TOUCHED: list[str] = []


class InternalNameUsed(RuntimeError):
    """A test used a name of the reference's internals, which has no counterpart here."""


def _used(name: str):
    if name not in TOUCHED:
        TOUCHED.append(name)
    return InternalNameUsed(f"{name} is an internal of comlrl 1.4.3 with no counterpart here")


class _StandInMeta(type):
    """Using the class (or a subclass) for anything but subclassing raises and is recorded."""

    def __call__(cls, *args, **kwargs):
        raise _used(cls._stand_in_for)

    def __getattr__(cls, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise _used(cls._stand_in_for)

    def _op(cls, *args):
        raise _used(cls._stand_in_for)

    # Used as a value: a path part, a string to join, a container (comparisons, hashing and
    # printing stay the class's own, so test machinery that lists or shows it keeps working).
    __truediv__ = __rtruediv__ = __add__ = __radd__ = __fspath__ = _op
    __contains__ = __getitem__ = __iter__ = __len__ = _op


def stand_in(qualified: str) -> type:
    """A stand-in for the 1.4.3 name ``qualified`` (``module.name``)."""
    return _StandInMeta(qualified.rsplit(".", 1)[-1], (), {"_stand_in_for": qualified})


class _StandInModule(types.ModuleType):
    """A module that does not exist here: every attribute is a stand-in."""

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        value = stand_in(f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value


def _install_module(name: str) -> None:
    module = _StandInModule(name)
    module.__path__ = []  # a package, so submodule imports find it too
    sys.modules[name] = module
    parent, _, leaf = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], leaf, module)


def install(entries: list[dict]) -> list[str]:
    """Install the stand-ins of ``entries`` (``{"module", "names"}``, names a list or ``"*"``
    for a whole module); returns the qualified names installed."""
    installed = []
    for entry in entries:
        name, names = entry["module"], entry["names"]
        try:
            module = importlib.import_module(name)
        except ImportError:
            if names != "*":
                raise ValueError(
                    f"stubs: {name} does not import; list it with names '*'."
                ) from None
            _install_module(name)
            installed.append(f"{name}.*")
            continue
        if names == "*":
            continue  # the module exists here: nothing to stand in for
        for attr in names:
            if not hasattr(module, attr):
                setattr(module, attr, stand_in(f"{name}.{attr}"))
                installed.append(f"{name}.{attr}")
    return installed


def pytest_configure(config):
    if _PATH:
        with open(_PATH, encoding="utf-8") as fh:
            install(json.load(fh).get("stubs", []))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    TOUCHED.clear()
