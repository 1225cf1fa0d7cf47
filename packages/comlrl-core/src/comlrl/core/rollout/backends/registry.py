"""The rollout-backend registry: the names the ``rollout_backend`` config field accepts.

Built in: ``hf`` (the agents' own models, :class:`~.hf.HFBackend`) and ``vllm`` (a colocated
vLLM engine, :class:`~.vllm.backend.VLLMBackend`; needs the ``vllm`` extra, ``pip install
'comlrl-core[vllm]'``). A third-party backend registers in-process with
:func:`register_rollout_backend`, or from its own package through the entry-point group
``comlrl.rollout_backends``, whose object is the factory (or a :class:`BackendEntry`)::

    [project.entry-points."comlrl.rollout_backends"]
    mine = "my_pkg.backend:build"

A factory takes a :class:`~.protocol.BackendInputs` (the loaded agents, their tokenizers and
the run's config, whose ``rollout_backend_options`` holds the backend's own settings) and
returns a :class:`~.protocol.RolloutBackend`. ``requires`` names the modules a backend needs:
when one is missing, the config check fails before any model loads, with the install line.
See docs/rollout_backends.md.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

from comlrl.core.rollout.backends.protocol import BackendInputs, RolloutBackend
from comlrl.core.rollout.backends.text import TextSampling, with_text

if TYPE_CHECKING:
    from comlrl.core.config.base import CommonConfig
    from comlrl.core.distributed import DistributedContext

ENTRY_POINT_GROUP = "comlrl.rollout_backends"
FIELD = "rollout_backend"
# What build_rollout_backend checks a factory's result for (RolloutBackend's methods).
PROTOCOL_METHODS = ("generate_ids", "on_weights_updated")


@dataclass(frozen=True)
class BackendEntry:
    """A registered backend: its factory, the modules it imports, and how to install them."""

    factory: Callable[[BackendInputs], RolloutBackend]
    requires: tuple[str, ...] = ()
    install: str | None = None
    # check_options(options dict or None) raises a ValueError for bad rollout_backend_options
    check_options: Callable[[Any], Any] | None = None


def _hf(inputs: BackendInputs) -> RolloutBackend:
    from comlrl.core.rollout.backends.hf import HFBackend

    a = inputs.args
    options = _hf_options(a.rollout_backend_options)
    return HFBackend(
        inputs.agents,
        inputs.tokenizers,
        a.generation_batch_size,
        fast_path=a.decode_fast_path,
        mixed_adapters=options["mixed_adapters"],
    )


def _vllm(inputs: BackendInputs) -> RolloutBackend:
    # Imported only when chosen: core never imports vllm otherwise.
    from comlrl.core.rollout.backends.vllm.backend import build_vllm_backend

    return build_vllm_backend(inputs)


def _vllm_options(options) -> Any:
    from comlrl.core.rollout.backends.vllm.options import vllm_options

    return vllm_options(options)


HF_OPTIONS = {"mixed_adapters": True}


def _hf_options(options) -> dict[str, Any]:
    """The ``hf`` backend's options with their defaults: ``mixed_adapters`` (bool, default
    True) decodes adapter agents of one base in mixed-adapter calls."""
    if options is None:
        return dict(HF_OPTIONS)
    if not isinstance(options, dict):
        raise ValueError(
            f"rollout_backend_options must be a mapping for rollout_backend='hf', got "
            f"{type(options).__name__}; valid keys: {', '.join(HF_OPTIONS)}."
        )
    unknown = sorted(set(options) - set(HF_OPTIONS))
    if unknown:
        raise ValueError(
            f"rollout_backend_options {unknown} are not options of rollout_backend='hf'; valid: "
            f"{', '.join(HF_OPTIONS)} (its other settings are generation_batch_size and "
            "decode_fast_path)."
        )
    value = options.get("mixed_adapters", True)
    if not isinstance(value, bool):
        raise ValueError(
            f"rollout_backend_options.mixed_adapters must be true or false, got {value!r}."
        )
    return {**HF_OPTIONS, **options}


_BUILTIN: dict[str, BackendEntry] = {
    "hf": BackendEntry(_hf, check_options=_hf_options),
    "vllm": BackendEntry(
        _vllm, ("vllm",), "pip install 'comlrl-core[vllm]'", check_options=_vllm_options
    ),
}
_REGISTERED: dict[str, BackendEntry] = {}


def register_rollout_backend(
    name: str,
    factory: Callable[[BackendInputs], RolloutBackend],
    *,
    requires: Sequence[str] = (),
    install: str | None = None,
    check_options: Callable[[Any], Any] | None = None,
) -> None:
    """Make ``rollout_backend: name`` build its backend with ``factory(inputs)``, where
    ``inputs`` is a :class:`~.protocol.BackendInputs` and the result implements
    :class:`~.protocol.RolloutBackend`.

    ``requires`` lists importable module names the backend needs and ``install`` the command
    that provides them; both go into the config-time error when one is missing.
    ``check_options(rollout_backend_options)`` (optional) raises a ValueError for bad options
    when the config is built.
    """
    key = str(name).strip().lower()
    if not key:
        raise ValueError("register_rollout_backend: name must be a non-empty string.")
    if key in _BUILTIN or key in _REGISTERED or key in _entry_points():
        raise ValueError(f"a rollout backend named {key!r} is already registered.")
    if not callable(factory):
        raise ValueError(f"register_rollout_backend({key!r}): factory must be callable.")
    _REGISTERED[key] = BackendEntry(factory, tuple(requires), install, check_options)


def unregister_rollout_backend(name: str) -> None:
    """Remove a backend registered with :func:`register_rollout_backend` (tests, notebooks)."""
    _REGISTERED.pop(str(name).strip().lower(), None)


def _entry_points() -> dict[str, Any]:
    return {ep.name.lower(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_rollout_backends() -> tuple[str, ...]:
    """Every backend name ``rollout_backend`` accepts here: built-in, registered, installed."""
    names = [*_BUILTIN, *_REGISTERED]
    names += [n for n in sorted(_entry_points()) if n not in names]
    return tuple(names)


def _entry(name: str) -> BackendEntry:
    key = str(name).strip().lower()
    if key in _BUILTIN:
        return _BUILTIN[key]
    if key in _REGISTERED:
        return _REGISTERED[key]
    eps = _entry_points()
    if key in eps:
        loaded = eps[key].load()
        return loaded if isinstance(loaded, BackendEntry) else BackendEntry(loaded)
    raise ValueError(
        f"{FIELD}={name!r} is not a known rollout backend; valid: "
        f"{', '.join(available_rollout_backends())} (register more with "
        "comlrl.core.rollout.backends.register_rollout_backend or the entry-point group "
        f"{ENTRY_POINT_GROUP!r})."
    )


def missing_modules(requires: Sequence[str]) -> list[str]:
    """The modules of ``requires`` that cannot be imported here (found without importing)."""
    return [m for m in requires if importlib.util.find_spec(m) is None]


def check_rollout_backend(name: Any, field: str = FIELD) -> str:
    """The normalized backend name, or a one-line ValueError naming ``field``: an unknown name
    (with the valid ones), or a backend whose packages are not installed (with the install
    command). Imports nothing the backend needs, so it is cheap enough for config time."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(
            f"{field} must be a backend name; valid: {', '.join(available_rollout_backends())}."
        )
    key = name.strip().lower()
    entry = _entry(key)
    missing = missing_modules(entry.requires)
    if missing:
        from comlrl.core.errors import OPTIONAL_PACKAGES, MissingPackageError, missing_package

        if key in _BUILTIN and missing[0] in OPTIONAL_PACKAGES:
            raise missing_package(missing[0], f"{field}={key!r}")
        how = entry.install or f"pip install {' '.join(missing)}"
        raise MissingPackageError(
            f"{field}={key!r} needs {', '.join(missing)}, which is not installed; "
            f"install it with `{how}`."
        )
    return key


def check_rollout_backend_options(name: str, options: Any) -> None:
    """Run backend ``name``'s own check of ``rollout_backend_options`` (if it has one)."""
    entry = _entry(name)
    if entry.check_options is not None:
        entry.check_options(options)


class BackendHost(Protocol):
    """What :func:`build_rollout_backend` reads of its host (a trainer whose agents are
    loaded): the agents, their tokenizers, the run's config and its distributed context."""

    @property
    def agents(self) -> Sequence[Any]: ...

    @property
    def tokenizers(self) -> Sequence[Any]: ...

    @property
    def args(self) -> CommonConfig: ...

    @property
    def dist(self) -> DistributedContext: ...


def build_rollout_backend(host: BackendHost, name: str | None = None) -> TextSampling:
    """The backend ``name`` (default: the host's ``rollout_backend`` field), built by its
    factory from the host's agents, tokenizers and config, with the text form
    (:func:`~.text.with_text`). A factory whose result lacks a protocol method is refused,
    naming the backend and the methods."""
    key = check_rollout_backend(name if name is not None else host.args.rollout_backend)
    inputs = BackendInputs(
        host.agents, host.tokenizers, host.args, fsdp=host.dist.sharding == "fsdp"
    )
    backend = _entry(key).factory(inputs)
    if not isinstance(backend, RolloutBackend):
        lacking = [m for m in PROTOCOL_METHODS if not callable(getattr(backend, m, None))]
        raise TypeError(
            f"{FIELD}={key!r}: its factory returned a {type(backend).__name__}, which has no "
            f"{', '.join(lacking)}; a rollout backend implements {' and '.join(PROTOCOL_METHODS)} "
            "(comlrl.core.rollout.backends.RolloutBackend)."
        )
    return with_text(backend, host.tokenizers)
