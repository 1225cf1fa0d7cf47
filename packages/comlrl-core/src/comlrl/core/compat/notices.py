"""One-time notices for settings whose effect differs from CoMLRL 1.4.3.

Each notice is a :class:`UserWarning` raised at most once per process, so a run (or a test
session) that builds many configs says it once.
"""

from __future__ import annotations

import warnings

_issued: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key in _issued:
        return
    _issued.add(key)
    warnings.warn(message, UserWarning, stacklevel=3)


def note_discount_applies(discount: float, num_turns: int, algorithm: str = "MAGRPO") -> None:
    """Warn once that a multi-turn ``discount`` below 1 now shapes the returns.

    CoMLRL 1.4.3 accepted ``discount`` in the REINFORCE family's config but summed returns
    undiscounted, and the task repositories' configs set ``discount: 0.9``. Here the value is
    applied (``R = r + discount * mean(R_children)``), so the same config trains differently.
    """
    if num_turns > 1 and discount != 1.0:
        _warn_once(
            "discount",
            f"{algorithm}: discount={discount} now takes effect: returns over the {num_turns} "
            "turns are R = r + discount * mean(R of the next turn). CoMLRL 1.4.3 accepted this "
            "field but ignored it (undiscounted returns); set discount: 1.0 to train as it did.",
        )
