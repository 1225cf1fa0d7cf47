"""What a trainer is built from: one :class:`TrainerInputs` object behind every constructor.

The CoMLRL-compatible constructors (``MAGRPOTrainer(agent_model=..., ...)``, each family with
the argument order of CoMLRL 1.4.3) are written out, typed, in each family; they build the
inputs object with :func:`inputs_from` and call ``trainer.setup(inputs)``. The CLI and MARLHF
build the inputs directly (``Trainer.from_inputs(inputs)``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar


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


_Inputs = TypeVar("_Inputs", bound=TrainerInputs)


def inputs_from(inputs_cls: type[_Inputs], arguments: dict[str, Any]) -> _Inputs:
    """``inputs_cls`` built from a constructor's arguments (its ``locals()``): ``self`` is
    dropped, and ``model`` (CoMLRL's older spelling of ``agent_model``) fills ``agent_model``
    when that is not given."""
    values = {k: v for k, v in arguments.items() if k not in ("self", "__class__")}
    legacy = values.pop("model", None)
    if legacy is not None and values.get("agent_model") is None:
        values["agent_model"] = legacy
    return inputs_cls(**values)
