"""Checks of a trainer's inputs where they arrive (construction and ``train()``).

Each check is cheap and runs before any model is loaded, so a mistyped argument costs a clear
ValueError that names the argument and what would be valid, instead of a silent no-op (an empty
dataset trains 0 steps) or an error from deep inside torch or transformers.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from comlrl.core.config.run_file import nearest_hint
from comlrl.core.models import check_model_config

if TYPE_CHECKING:
    from comlrl.core.trainer import TrainerBase


def check_dataset(dataset: Any, field: str, *, default_formatter: bool) -> None:
    """``dataset`` must be a non-empty, sized and indexable sequence of mapping rows (a list of
    dicts or a ``datasets.Dataset``); with the default formatter every row needs ``prompt``."""
    if dataset is None:
        return
    kind = type(dataset).__name__
    if isinstance(dataset, Iterator) or inspect.isgenerator(dataset):
        raise ValueError(
            f"{field} is a {kind}, which can be read only once and has no length; pass a list of "
            f"dict rows (e.g. list(...)) or a datasets.Dataset."
        )
    if (
        isinstance(dataset, (str, bytes, Mapping))
        or not hasattr(dataset, "__len__")
        or not hasattr(dataset, "__getitem__")
    ):
        raise ValueError(
            f"{field} must be a list of dict rows or a datasets.Dataset, got {kind}; e.g. "
            "[{'prompt': 'Write a story about a cat.'}]."
        )
    if len(dataset) == 0:
        raise ValueError(
            f"{field} is empty: training on it would run 0 steps; give at least one row "
            "(a dict with a 'prompt' key for the default formatter)."
        )
    columns = getattr(dataset, "column_names", None)
    if isinstance(columns, list):  # a datasets.Dataset: its schema speaks for every row
        if default_formatter and "prompt" not in columns:
            raise ValueError(_no_prompt(field, f"its columns are {columns}"))
        return
    # Lists are scanned whole (cheap); a lazy dataset object has only its first row read.
    for i in range(len(dataset) if isinstance(dataset, (list, tuple)) else 1):
        row = dataset[i]
        if not isinstance(row, Mapping):
            raise ValueError(
                f"{field}[{i}] is a {type(row).__name__}, not a dict row; rows must be mappings "
                f"such as {{'prompt': {str(row)[:40]!r}}}."
            )
        if default_formatter and "prompt" not in row:
            raise ValueError(_no_prompt(f"{field}[{i}]", f"its keys are {sorted(map(str, row))}"))


def _no_prompt(where: str, found: str) -> str:
    return (
        f"{where} has no 'prompt' key ({found}); the default formatter reads row['prompt']. Add "
        "the key, or pass formatters= that build each agent's prompt from your columns."
    )


def check_output_dir(path: Any, field: str = "output_dir") -> None:
    """``path`` (or the first of its parents that exists) must be a directory, not a file."""
    if path is None or path == "":
        return
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{field} must be a path or None, got {type(path).__name__}.")
    probe = os.path.abspath(os.path.expanduser(os.fspath(path)))
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        where = "" if probe == os.path.abspath(os.fspath(path)) else f" (its parent {probe})"
        raise ValueError(
            f"{field}: {os.fspath(path)!r}{where} is an existing file; give a directory path "
            "(it is created when missing)."
        )


def check_agent_count(agents: Any, num_agents: Any, trainer_cls: type[Any]) -> None:
    """``agents=[...]`` and an explicit ``num_agents`` must agree.

    Trainers whose signature defaults ``num_agents`` to a number cannot tell that default from
    an explicit value, so only a ``num_agents`` other than the default is compared; the agent
    count is then ``len(agents)``.
    """
    if agents is None or num_agents is None or isinstance(agents, (str, bytes)):
        return
    if not isinstance(agents, Sequence) or len(agents) == num_agents:
        return
    param = inspect.signature(trainer_cls.__init__).parameters.get("num_agents")
    if param is not None and param.default == num_agents:
        return
    raise ValueError(
        f"num_agents={num_agents} but agents lists {len(agents)} model(s); list one model per "
        f"agent, or drop num_agents (it is then len(agents) = {len(agents)})."
    )


def check_construction(
    trainer: TrainerBase, train_dataset: Any, eval_dataset: Any, formatters: Any
) -> None:
    """The checks of a trainer's constructor arguments that need no file system access beyond
    ``output_dir`` (model directories are checked by :func:`~comlrl.core.models.load_agents`
    just before loading). Reads the trainer's ``model_config`` and ``args``."""
    default = formatters is None
    check_dataset(train_dataset, "train_dataset", default_formatter=default)
    check_dataset(eval_dataset, "eval_dataset", default_formatter=default)
    check_output_dir(getattr(trainer.args, "output_dir", None), "args.output_dir")
    check_model_config(trainer.model_config)


# generate() parameters and GenerationConfig fields that a caller never passes by keyword
_NOT_GENERATION = frozenset({"self", "inputs", "transformers_version"})


@functools.cache
def generation_keywords() -> frozenset[str]:
    """Keyword arguments ``model.generate`` understands: the fields of transformers'
    ``GenerationConfig`` and the parameters of ``generate`` itself."""
    from transformers import GenerationConfig
    from transformers.generation.utils import GenerationMixin

    fields = set(GenerationConfig().to_dict())
    params = {
        name
        for name, p in inspect.signature(GenerationMixin.generate).parameters.items()
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }
    return frozenset(
        n for n in fields | params if not n.startswith("_") and n not in _NOT_GENERATION
    )


def check_generation_kwargs(kwargs: Mapping[str, Any], function: str = "train()") -> None:
    """Extra keyword arguments of ``train()`` go to ``model.generate``; unknown ones are
    rejected here instead of being ignored or failing mid-rollout."""
    if not kwargs:
        return
    valid = generation_keywords()
    for key in kwargs:
        if key not in valid:
            raise ValueError(
                f"{function} got an unknown keyword {key!r}{nearest_hint(key, valid)}. Extra "
                "keywords of train() are passed to model.generate: use a field of "
                "transformers.GenerationConfig (e.g. repetition_penalty, min_new_tokens) or one "
                "of train()'s checkpoint arguments."
            )
