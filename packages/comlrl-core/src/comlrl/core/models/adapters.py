"""N agents on one base: one frozen copy of the base model and one PEFT adapter per agent.

:class:`SharedBase` holds a single ``peft`` model over the base with one named adapter per
agent (peft's multi-adapter API: ``add_adapter`` / ``set_adapter``); :meth:`SharedBase.agent`
gives each agent a view, :class:`AdapterAgent`, that runs the model with its own adapter active
and whose ``parameters()`` are its adapter's only, so an optimizer built over them trains that
adapter alone. The KL reference is the base itself: :meth:`AdapterAgent.reference` runs the
model with every adapter disabled, so no reference copy is kept.

The active adapter is state of the shared model, so every forward of a view selects its
adapter and runs under one lock: agents in threads take turns, and a backward uses the graph
its own forward built. With gradient checkpointing a backward re-runs each layer's forward, and
peft's LoRA layers read the adapter active at that moment: :meth:`SharedBase.checkpoint_contexts`
(the checkpoint's ``context_fn``) re-activates, for each recomputed layer, the adapter its
forward ran with, so a joint backward after several agents' forwards stays exact.

The trainers' model loading builds one :class:`SharedBase` for agents of one base when
``peft_config`` is set (:func:`comlrl.core.models.setup.prepare_agents`), and their KL reference
is a :class:`BaseReference` over it (no model copy).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

from comlrl.core.models.setup import build_peft_config


class SharedBase:
    """One frozen base model and one adapter per name in ``names``, all of ``peft_config``
    (a checked ``peft_config`` dict or a peft config object)."""

    def __init__(self, base_model, peft_config: Any, names: Sequence[str]):
        from peft import get_peft_model

        names = list(names)
        if not names or len(set(names)) != len(names):
            raise ValueError(f"names must be distinct and non-empty, got {names!r}.")
        config = peft_config
        if isinstance(peft_config, Mapping):
            config = build_peft_config(peft_config)
        self.names = names
        self.model = get_peft_model(base_model, config, adapter_name=names[0])
        for name in names[1:]:
            self.model.add_adapter(name, config)
        self.lock = threading.RLock()
        self._running: list[str | None] = []  # the adapters of the forwards under way
        self._adapter_params = [
            p for n, p in self.model.named_parameters() if any(_owns(n, a) for a in names)
        ]
        self._trainable()
        self.base_name = (
            getattr(base_model.config, "_name_or_path", "") or type(base_model).__name__
        )

    def agent(self, name: str) -> AdapterAgent:
        """The view of the agent whose adapter is ``name``."""
        if name not in self.names:
            raise ValueError(f"no adapter named {name!r}; the adapters are {self.names}.")
        return AdapterAgent(self, name)

    def agents(self) -> list[AdapterAgent]:
        """One view per adapter, in the order of ``names``."""
        return [self.agent(n) for n in self.names]

    @contextlib.contextmanager
    def active(self, name: str | None) -> Iterator[None]:
        """Hold the lock with adapter ``name`` active (None: every adapter disabled)."""
        with self.lock:
            self._running.append(name)
            try:
                if name is None:
                    with self.model.disable_adapter():
                        yield
                    return
                if self.model.active_adapter != name:
                    self.model.set_adapter(name)
                    self._trainable()
                yield
            finally:
                self._running.pop()

    def checkpoint_contexts(self):
        """``context_fn`` of ``torch.utils.checkpoint`` for the shared model's layers: called
        at a checkpointed layer's forward, it returns a no-op for the forward and, for the
        recomputation in the backward, the adapter that forward ran with (taken again under
        the lock), whichever agent's forward came last."""
        name = self._running[-1] if self._running else self.model.active_adapter
        return contextlib.nullcontext(), self.active(name)

    def _trainable(self) -> None:
        # peft's set_adapter freezes the inactive adapters, and autograd drops the gradient of a
        # parameter frozen between its forward and its backward: agents' forwards interleave
        # (all score, then all step), so every adapter stays trainable. An inactive adapter is
        # not in the graph and gets no gradient anyway.
        for p in self._adapter_params:
            p.requires_grad_(True)


def _owns(param_name: str, adapter: str) -> bool:
    return f".{adapter}." in param_name or param_name.endswith(f".{adapter}")


def _base_parameters(shared: SharedBase, module, *args):
    """``module.named_parameters(*args)`` without any adapter's: the frozen base's own."""
    for n, p in module.named_parameters(*args):
        if not any(_owns(n, a) for a in shared.names):
            yield n, p


class _SharedModelView(torch.nn.Module):
    """A view of a :class:`SharedBase`'s model: the model is a plain attribute, not a
    submodule, so the view's parameters are only those its ``named_parameters`` selects;
    other attributes (config, generation_config, device, ...) come from the shared model."""

    def __init__(self, shared: SharedBase):
        super().__init__()
        object.__setattr__(self, "shared", shared)

    def parameters(self, recurse: bool = True):
        """The parameters :meth:`named_parameters` selects."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.shared.model, name)


def shared_base_of(model: Any) -> SharedBase | None:
    """The :class:`SharedBase` behind an adapter view (an agent, its body or the reference),
    whose model is what the view's forwards run; None for any other model."""
    return model.shared if isinstance(model, _SharedModelView) else None


class AdapterAgent(_SharedModelView):
    """One agent of a :class:`SharedBase`: calls run the shared model with this agent's
    adapter, and its parameters are its adapter's alone."""

    def __init__(self, shared: SharedBase, name: str):
        super().__init__(shared)
        object.__setattr__(self, "adapter_name", name)
        object.__setattr__(self, "_body", AdapterBody(shared, name))

    def hidden_body(self) -> AdapterBody:
        """The transformer body under this agent's adapter (no LM head), for value heads that
        read hidden states: :func:`comlrl.core.models.backbone.backbone_of` returns it."""
        return self._body

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        """This agent's adapter parameters (the base and other adapters are not its own)."""
        for n, p in self.shared.model.named_parameters(prefix, recurse, remove_duplicate):
            if _owns(n, self.adapter_name):
                yield n, p

    def forward(self, *args, **kwargs):
        """The shared model's forward with this agent's adapter active."""
        with self.shared.active(self.adapter_name):
            return self.shared.model(*args, **kwargs)

    def generate(self, *args, **kwargs):
        """The shared model's ``generate`` with this agent's adapter active."""
        with self.shared.active(self.adapter_name), torch.no_grad():
            return self.shared.model.generate(*args, **kwargs)

    @contextlib.contextmanager
    def reference(self) -> Iterator[Any]:
        """The KL reference: the shared model with every adapter disabled (the frozen base)."""
        with self.shared.active(None):
            yield self.shared.model

    def reference_model(self) -> BaseReference:
        """A light module that runs the shared model with every adapter disabled."""
        return BaseReference(self.shared)

    def state_dict(self, *args, **kwargs):
        """This agent's adapter weights, as peft saves them."""
        from peft import get_peft_model_state_dict

        return get_peft_model_state_dict(self.shared.model, adapter_name=self.adapter_name)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Load adapter weights saved by :meth:`state_dict` into this agent's adapter."""
        from peft import set_peft_model_state_dict

        return set_peft_model_state_dict(
            self.shared.model, state_dict, adapter_name=self.adapter_name
        )

    def save_pretrained(self, directory, **kwargs) -> None:
        """Save this agent's adapter (its ``adapter_config.json`` names the base model)."""
        import os
        import shutil
        import tempfile

        # peft writes a named adapter into a sub-directory of that name; the agent's directory
        # holds its adapter directly, as a single-adapter peft model saves it.
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            self.shared.model.save_pretrained(tmp, selected_adapters=[self.adapter_name], **kwargs)
            src = os.path.join(tmp, self.adapter_name)
            src = src if os.path.isdir(src) else tmp
            for name in os.listdir(src):
                target = os.path.join(directory, name)
                if os.path.isdir(target):
                    shutil.rmtree(target)
                shutil.move(os.path.join(src, name), target)

    def train(self, mode: bool = True):
        """Set the shared model's mode (the base and every adapter share it)."""
        self.shared.model.train(mode)
        self.training = mode
        return self


class BaseReference(_SharedModelView):
    """The KL reference of a :class:`SharedBase`'s agents: calls run the shared model with
    every adapter disabled. It holds no weights of its own; its ``parameters()`` are the
    shared base's frozen ones (where callers read the device), never an adapter's."""

    def forward(self, *args, **kwargs):
        with self.shared.active(None), torch.no_grad():
            return self.shared.model(*args, **kwargs)

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        return _base_parameters(self.shared, self.shared.model, prefix, recurse, remove_duplicate)

    def to(self, *args, **kwargs):
        return self  # it runs wherever the shared model is

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self


class AdapterBody(_SharedModelView):
    """The transformer body of a :class:`SharedBase`'s model (no LM head) run with one agent's
    adapter active. Its ``parameters()`` are the frozen base's, where callers read the device
    and size; the adapter's are the agent's own."""

    def __init__(self, shared: SharedBase, name: str):
        super().__init__(shared)
        object.__setattr__(self, "adapter_name", name)

    def _inner(self):
        return self.shared.model.get_base_model().base_model

    @property
    def config(self):
        """The body's config."""
        return self._inner().config

    def forward(self, *args, **kwargs):
        with self.shared.active(self.adapter_name):
            return self._inner()(*args, **kwargs)

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        return _base_parameters(self.shared, self._inner(), prefix, recurse, remove_duplicate)

    def train(self, mode: bool = True):
        """Set the shared model's mode (the body, its head and every adapter share it)."""
        self.shared.model.train(mode)
        self.training = mode
        return self


def shared_base_groups(agents: Sequence[Any]) -> list[list[int]]:
    """Indices of the agents that are one model object, in first-seen order."""
    groups: dict[int, list[int]] = {}
    for i, m in enumerate(agents):
        groups.setdefault(id(m), []).append(i)
    return list(groups.values())


def parameter_bytes(models: Sequence[torch.nn.Module]) -> int:
    """Bytes of the distinct parameter storages that ``models`` hold together, counting every
    parameter of the shared model behind an :class:`AdapterAgent` once."""
    seen: dict[int, int] = {}
    for m in models:
        owner = m.shared.model if isinstance(m, AdapterAgent) else m
        for p in owner.parameters():
            seen[p.untyped_storage().data_ptr()] = p.untyped_storage().nbytes()
    return sum(seen.values())
