"""What a trainer is built from: one :class:`TrainerInputs` object behind every constructor.

The CoMLRL-compatible constructors (``MAGRPOTrainer(agent_model=..., ...)``, each family with
the argument order of CoMLRL 1.4.3) are thin shims made by :func:`compat_constructor`: they
bind their arguments to the family's signature, build the inputs object and call
``trainer.setup(inputs)``. The CLI and MARLHF build the inputs directly
(``Trainer.from_inputs(inputs)``), so nothing probes constructor signatures.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class TrainerInputs:
    """Models, data and callbacks of a run (the config travels as ``args``)."""

    agent_model: Any = None
    agents: Any = None
    num_agents: int | None = None
    tokenizer: Any = None
    model_config: dict | None = None
    train_dataset: Any = None
    eval_dataset: Any = None
    dataset_type: str | None = None
    reward_func: Callable | None = None
    reward_processor: Callable | None = None
    formatters: Any = None
    external_transition: Callable | None = None
    wandb_config: dict | None = None
    eval_logger: Callable | None = None
    eval_aggregator: Callable | None = None
    args: Any = None

    def replace(self, **changes: Any) -> TrainerInputs:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)


def _param(name: str, default: Any = None, kind=inspect.Parameter.POSITIONAL_OR_KEYWORD):
    return inspect.Parameter(name, kind, default=default)


def signature_of(
    positional: Sequence[str | tuple[str, Any]], keyword_only: Sequence[str | tuple[str, Any]] = ()
) -> inspect.Signature:
    """A constructor signature: names (default None) or (name, default) pairs, in order."""

    def build(spec, kind):
        name, default = (spec, None) if isinstance(spec, str) else spec
        return _param(name, default, kind)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [build(s, inspect.Parameter.POSITIONAL_OR_KEYWORD) for s in positional]
    params += [build(s, inspect.Parameter.KEYWORD_ONLY) for s in keyword_only]
    return inspect.Signature(params)


# The argument order of CoMLRL 1.4.3's MAGRPO-style trainers (MAGRPO and its variants, MADPO,
# MARLHF and the iterative trainers).
MAGRPO_STYLE = (
    "agent_model",
    "agents",
    ("num_agents", 2),
    "tokenizer",
    "model_config",
    "train_dataset",
    "eval_dataset",
    "dataset_type",
    "reward_func",
    "reward_processor",
    "formatters",
    "external_transition",
    "wandb_config",
    "eval_logger",
    "eval_aggregator",
    "args",
)


def compat_constructor(signature: inspect.Signature, inputs_cls: type = TrainerInputs):
    """An ``__init__`` with ``signature`` that builds ``inputs_cls`` from its arguments and
    calls ``self.setup(inputs)``.

    Arguments that ``inputs_cls`` does not declare raise a TypeError naming them, as a
    misspelled keyword would. ``model`` (an older CoMLRL spelling of ``agent_model``) is
    honoured when the signature has it.
    """
    names = {f.name for f in dataclasses.fields(inputs_cls)}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        values.pop("self")
        legacy = values.pop("model", None)
        if legacy is not None and values.get("agent_model") is None:
            values["agent_model"] = legacy
        unknown = sorted(set(values) - names)
        if unknown:
            raise TypeError(f"{type(self).__name__} got unexpected arguments: {unknown}.")
        self.setup(inputs_cls(**values))

    # What inspect.signature (and so help() and editors) shows for the constructor.
    init: Any = __init__
    init.__signature__ = signature
    init.__doc__ = "Build the trainer (CoMLRL-compatible arguments; see the class docs)."
    return __init__
