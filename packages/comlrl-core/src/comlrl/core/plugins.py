"""Discovery of installed algorithms and tasks through entry points.

Families register trainer classes under the ``comlrl.algorithms`` group and tasks register task
objects under ``comlrl.tasks``. A custom algorithm that depends only on comlrl-core registers the
same way, in its own ``pyproject.toml``.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

ALGORITHM_GROUP = "comlrl.algorithms"
TASK_GROUP = "comlrl.tasks"

# Which distribution provides each first-party algorithm, for "please install" hints.
PROVIDERS = {
    "magrpo": "comlrl-reinforce",
    "mareinforce": "comlrl-reinforce",
    "marloo": "comlrl-reinforce",
    "maremax": "comlrl-reinforce",
    "centralized_magrpo": "comlrl-reinforce",
    "iac": "comlrl-ac",
    "maac": "comlrl-ac",
    "madpo": "comlrl-pbrl",
    "marlhf": "comlrl-pbrl",
    "madpo_iter": "comlrl-pbrl",
    "marlhf_iter": "comlrl-pbrl",
}


def _group(name: str) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=name)}


def available_algorithms() -> list[str]:
    """Names of every installed algorithm."""
    return sorted(_group(ALGORITHM_GROUP))


def available_tasks() -> list[str]:
    """Names of every installed task."""
    return sorted(_group(TASK_GROUP))


def load_algorithm(name: str) -> Any:
    """The trainer class registered as ``name`` (case-insensitive)."""
    key = name.strip().lower()
    eps = _group(ALGORITHM_GROUP)
    if key not in eps:
        hint = ""
        if key in PROVIDERS:
            hint = f" It is provided by {PROVIDERS[key]}: pip install {PROVIDERS[key]}."
        raise ValueError(
            f"Unknown algorithm {name!r}; installed: {', '.join(sorted(eps)) or 'none'}.{hint}"
        )
    return eps[key].load()


def load_task(name: str) -> Any:
    """The task object registered as ``name``."""
    key = name.strip().lower()
    eps = _group(TASK_GROUP)
    if key not in eps:
        raise ValueError(
            f"Unknown task {name!r}; installed: {', '.join(sorted(eps)) or 'none'}. Tasks come "
            "from comlrl-tasks (pip install comlrl-tasks) or your own package."
        )
    return eps[key].load()
