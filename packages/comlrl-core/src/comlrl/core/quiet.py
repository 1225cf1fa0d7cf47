"""Keep transformers' per-file progress bars out of training output.

transformers draws a "Loading weights" bar for every model it loads and a "Writing model shards"
bar for every model it saves. A run loads and saves several models, on every rank, so those
bars bury the training bar. :func:`quiet_hub_progress` switches off transformers' own bars for
the duration of one load or save and restores the previous setting afterwards. The download bars
of ``huggingface_hub`` stay as they are: a first download of a large model should show progress.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.RLock()
_depth = 0
_saved: bool | None = None


def _tf_logging():
    from transformers.utils import logging as tf_logging

    return tf_logging


@contextmanager
def quiet_hub_progress() -> Iterator[None]:
    """Within the block, transformers draws no progress bars of its own.

    Nesting and concurrent agent workers are safe: the first entry saves the user's setting and
    the last exit restores it.
    """
    global _depth, _saved
    tf_logging = _tf_logging()
    with _lock:
        if _depth == 0:
            _saved = bool(getattr(tf_logging, "_tqdm_active", True))
            # The module flag, not disable_progress_bar(): that would also silence downloads.
            tf_logging._tqdm_active = False
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                tf_logging._tqdm_active = _saved


def quietly(func: F) -> F:
    """``func`` run inside :func:`quiet_hub_progress` (for loaders and ``save_model``)."""
    if getattr(func, "_quiet_hub_progress", False):
        return func

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with quiet_hub_progress():
            return func(*args, **kwargs)

    wrapper._quiet_hub_progress = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
