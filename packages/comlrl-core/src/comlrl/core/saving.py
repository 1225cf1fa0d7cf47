"""Saving from one process of a multi-process run."""

from __future__ import annotations

import functools
from contextlib import nullcontext
from typing import Any

from comlrl.core.distributed import barrier


def main_process_only(method):
    """Run a saving method on rank 0 only; every rank returns once it is done (a barrier).

    :class:`TrainerBase` applies it to ``save_model`` of every subclass that defines one, so a
    family's own saving code needs no rank checks. Nested calls (a subclass calling
    ``super().save_model``) run plainly inside the outer one.
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if not self.dist.is_distributed or getattr(self, "_saving_on_main", False):
            return method(self, *args, **kwargs)
        result = None
        # Sharded agents are gathered into full tensors on every rank before rank 0 saves.
        sharded = self.sync.sharded
        view = sharded.full_view() if sharded is not None else nullcontext()
        try:
            with view:
                if self.dist.is_main:
                    self._saving_on_main = True
                    try:
                        result = method(self, *args, **kwargs)
                    finally:
                        self._saving_on_main = False
        finally:
            barrier(self.dist)
        return result

    # Marks the method as wrapped, so that TrainerBase.__init_subclass__ wraps it once.
    marked: Any = wrapper
    marked._main_process_only = True
    return wrapper
