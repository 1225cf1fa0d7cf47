"""FSDP2 sharding of the agents in a multi-process run (``distributed_mode="fsdp"``, or an
``accelerate launch`` whose config sets ``distributed_type: FSDP``).

Each agent is wrapped with ``torch.distributed.fsdp.fully_shard`` (its decoder layers, then the
whole model), so its gradients after reduction and its optimizer state live in 1/world_size
shards on each rank. While a run trains, the parameters are kept gathered: rollouts decode a
different number of steps on every rank, and every rank runs its own number of loss
micro-batches, so a collective per forward pass (what FSDP does when it re-shards after each
forward) would deadlock. Gradients accumulate locally and are reduce-scattered once per optimizer
step by a tiny synchronizing pass that every rank runs; after the step the updated shards are
gathered again. This is the memory profile of ``reshard_after_forward: false`` (ZeRO-2): the
optimizer state, usually the largest part (Adam keeps two fp32 copies), is sharded; parameters
and the gradients of the step in flight are not.

Checkpoints and saved models hold full tensors (gathered on every rank, written by rank 0), so a
sharded run's checkpoint resumes in a sharded run of the same world size and its saved agents load
anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import torch

from comlrl.core.distributed import DistributedContext

if TYPE_CHECKING:
    from torch.distributed.tensor import DTensor


def is_dtensor(value: Any) -> bool:
    """Whether ``value`` is a ``DTensor`` (a sharded or replicated distributed tensor)."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # torch without the distributed tensor package
        return False
    return isinstance(value, DTensor)


def full_tensor(value: torch.Tensor) -> torch.Tensor:
    """The whole tensor behind a ``DTensor`` (a collective: every rank must call it), or
    ``value`` itself."""
    return cast("DTensor", value).full_tensor() if is_dtensor(value) else value


def full_state_dict(
    state: dict[str, Any], model: Any = None, *, keep: bool = True
) -> dict[str, Any]:
    """``state`` with every ``DTensor`` gathered into a plain tensor (collective: every rank
    gathers the same entries in the same order). Entries that are one parameter of ``model``
    (tied weights) stay one tensor, so aliases survive. ``keep=False`` joins the gathers and
    keeps nothing (a rank that will not save), so no rank holds more than one full tensor of
    the model on its device at a time beyond what it keeps on the CPU."""
    owner: dict[str, int] = {}
    if model is not None:
        for name, param in model.named_parameters(remove_duplicate=False):
            owner[name] = id(param)
    out: dict[str, Any] = {}
    gathered: dict[int, torch.Tensor | None] = {}  # None: gathered, not kept
    for key, value in state.items():
        if not is_dtensor(value):
            out[key] = value
            continue
        ident = owner.get(key)
        if ident is not None and ident in gathered:
            out[key] = gathered[ident]  # a tied weight: gathered once, on every rank alike
            continue
        full = cast("DTensor", value).full_tensor()
        kept = full.to("cpu") if keep else None
        if ident is not None:
            gathered[ident] = kept
        out[key] = kept
    return out if keep else {}


def like_placement(value: torch.Tensor, template: Any) -> torch.Tensor:
    """``value`` (a full tensor) distributed like ``template`` when that is a ``DTensor``."""
    if not is_dtensor(template) or is_dtensor(value):
        return value
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(
        value.to(template.device_mesh.device_type), template.device_mesh, template.placements
    )


def _fsdp_units(model: Any) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


class ShardedAgents:
    """The FSDP2-wrapped agents of one trainer and the gather / gradient-sync protocol above."""

    def __init__(self, models: Sequence[Any], ctx: DistributedContext):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        self.ctx = ctx
        self.roots: list[Any] = []
        self._owner: dict[int, Any] = {}  # sharded parameter (what optimizers hold) -> model
        self._sharded_ids: dict[int, set[int]] = {}
        self._gathered = False
        for model in models:
            if any(model is r for r in self.roots):
                continue  # agents sharing one model object shard it once
            device = next(model.parameters()).device
            mesh = init_device_mesh(device.type, (ctx.world_size,))
            layer_types = set(getattr(model, "_no_split_modules", None) or ())
            for module in list(model.modules()):
                if module is not model and type(module).__name__ in layer_types:
                    fully_shard(module, mesh=mesh)
            fully_shard(model, mesh=mesh)
            self.roots.append(model)
            for p in model.parameters():
                self._owner[id(p)] = model
            self._sharded_ids[id(model)] = {id(p) for p in model.parameters()}

    def roots_of(self, params: Iterable[torch.nn.Parameter]) -> list[Any]:
        """The sharded models that own any of ``params``. FSDP swaps a module's parameters
        between sharded and gathered objects, so both are recognised."""
        ids = {id(p) for p in params}
        return [
            root
            for root in self.roots
            if ids & ({id(p) for p in root.parameters()} | self._sharded_ids[id(root)])
        ]

    def split(self, params: Iterable[torch.nn.Parameter]) -> tuple[list[Any], list[Any]]:
        """``params`` split into the sharded models owning some of them and the parameters of
        no sharded model (replicated ones, e.g. critics)."""
        params = list(params)
        roots = self.roots_of(params)
        owned = set().union(
            *({id(p) for p in r.parameters()} | self._sharded_ids[id(r)] for r in roots)
        )
        return roots, [p for p in params if id(p) not in owned]

    # ------------------------------------------------------------------ gathering
    def _set(self, model: Any, *, sync: bool, reshard: bool) -> None:
        for unit in _fsdp_units(model):
            unit.set_requires_gradient_sync(sync, recurse=False)
            unit.set_reshard_after_forward(reshard, recurse=False)
            unit.set_reshard_after_backward(reshard, recurse=False)

    def gather(self, models: Iterable[Any] | None = None) -> None:
        """All-gather the parameters and keep them gathered (no per-forward collectives; local
        gradient accumulation). Every rank must call it."""
        for model in self.roots if models is None else models:
            self._set(model, sync=False, reshard=False)
            for unit in _fsdp_units(model):
                unit.unshard()
        self._gathered = True

    def release(self) -> None:
        """Back to plain FSDP: parameters sharded, default re-sharding and gradient sync."""
        for model in self.roots:
            self._set(model, sync=True, reshard=True)
            for unit in _fsdp_units(model):
                unit.reshard()
        self._gathered = False

    @contextmanager
    def training(self):
        """Parameters gathered for a whole ``train()`` call (re-gathered after each step)."""
        from torch.optim.optimizer import register_optimizer_step_post_hook

        owned = self._owner

        def regather(optimizer, args, kwargs):
            touched = {
                id(owned[id(p)]): owned[id(p)]
                for group in optimizer.param_groups
                for p in group["params"]
                if id(p) in owned
            }
            if touched:
                self.gather(touched.values())

        handle = register_optimizer_step_post_hook(regather)
        self.gather()
        try:
            yield
        finally:
            handle.remove()
            self.release()

    # ------------------------------------------------------------------ gradients
    def reduce_gradients(self, params: Sequence[torch.nn.Parameter]) -> list[torch.nn.Parameter]:
        """Reduce-scatter (mean over ranks) the locally accumulated gradients of the sharded
        models that own ``params``: one zero-weighted forward/backward of one token per model,
        with gradient sync on, which every rank runs once per optimizer step. Returns the
        models' sharded parameters, which now hold the reduced gradients."""
        roots = self.roots_of(params)
        for model in roots:
            if not self._gathered:
                continue  # plain FSDP mode: every backward already synchronized
            self._set(model, sync=True, reshard=True)
            device = next(model.parameters()).device
            token = torch.zeros(1, 1, dtype=torch.long, device=device)
            was_training = model.training
            model.train()
            with torch.enable_grad():
                out = model(input_ids=token, use_cache=False)
                logits = out.logits if hasattr(out, "logits") else out[0]
                (logits.float().sum() * 0.0).backward()
            model.train(was_training)
        return [p for model in roots for p in model.parameters()]

    # ------------------------------------------------------------------ full state
    @contextmanager
    def full_view(self, optimizers: Sequence[Any] = ()):
        """Inside, ``state_dict()`` of every sharded model and of ``optimizers`` returns full,
        plain tensors (gathered on every rank: every rank must enter), so saving code written
        for unsharded models works unchanged on rank 0."""
        patched = []
        keep = self.ctx.is_main  # only rank 0 saves; the others just join the gathers
        for model in self.roots:
            full = full_state_dict(model.state_dict(), model, keep=keep)
            if keep:
                model.state_dict = lambda *a, _full=full, **k: dict(_full)
                patched.append(model)
        for optimizer in optimizers:
            state = optimizer.state_dict()
            entries: dict[Any, dict[str, Any]] = {}
            for pid, entry in state["state"].items():
                entries[pid] = {}
                for k, v in entry.items():
                    if isinstance(v, torch.Tensor) and is_dtensor(v):
                        v = cast("DTensor", v).full_tensor().to("cpu")
                    entries[pid][k] = v
            if keep:
                state["state"] = entries
                optimizer.state_dict = lambda *a, _state=state, **k: _state
                patched.append(optimizer)
        try:
            yield
        finally:
            for obj in patched:
                del obj.state_dict  # back to the class's method


def clip_gradients(params: Sequence[torch.nn.Parameter], max_norm: float) -> float:
    """``clip_grad_norm_`` over ``params`` (sharded or not); returns the total norm."""
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return float(full_tensor(norm))


def unsharded_copy(model: Any) -> Any:
    """A plain (unsharded) copy of an FSDP2-wrapped Hugging Face model, built from its config and
    its gathered weights (collective); any other model is deep-copied."""
    import copy

    if not any(is_dtensor(p) for p in model.parameters()):
        return copy.deepcopy(model)
    from transformers import AutoModelForCausalLM

    state = full_state_dict(model.state_dict(), model)
    replica = AutoModelForCausalLM.from_config(model.config)
    replica.load_state_dict(state, strict=False)
    device = next(model.parameters()).device
    return replica.to(device=device, dtype=next(iter(state.values())).dtype)
