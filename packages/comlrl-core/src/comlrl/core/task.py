"""The contract a task package implements so the CLI and trainers can use it.

A task turns a :class:`TaskSpec` (what the user's YAML ``dataset``/``external``/``task`` sections
say) into a :class:`TaskBundle`: the datasets, one formatter per agent, the joint reward, and the
optional multi-turn transition and eval hooks. Tasks register an object with a ``build`` method
under the ``comlrl.tasks`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class TaskSpec:
    """What a user asked of a task.

    ``dataset_name`` is a hub id, a local JSON/JSONL/Parquet file or directory, or None for the
    task's built-in offline sample. ``options`` holds task-specific keys from the YAML ``task``
    section.
    """

    num_agents: int = 2
    dataset_name: str | None = None
    train_split: str | None = None
    eval_split: str | None = None
    train_limit: int | None = None
    eval_limit: int | None = None
    external_mode: str | None = None
    tokenizer: Any = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class TaskBundle:
    """Everything a trainer needs from a task."""

    train_dataset: Sequence[dict]
    formatters: list[Callable[..., str]]
    reward_func: Callable[..., Any]
    eval_dataset: Sequence[dict] | None = None
    external_transition: Callable[..., Any] | None = None
    eval_logger: Callable[..., Any] | None = None
    eval_aggregator: Callable[..., Any] | None = None


@runtime_checkable
class Task(Protocol):
    """A registered environment: a name, a default agent count, and a ``build`` method.

    A task may also declare ``option_names``, the set of ``task.options`` keys it accepts; run
    files are then checked against it before anything loads (unknown keys get the nearest
    valid name). A task without it receives its options unchecked.
    """

    name: str
    description: str
    num_agents: int

    def build(self, spec: TaskSpec) -> TaskBundle:
        """Load data and construct the formatters, reward and hooks for ``spec``."""
        ...
