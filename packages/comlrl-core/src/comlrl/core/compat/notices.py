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


def note_wandb_needs_report_to(wandb_config: dict | None, report_to: list[str] | None) -> None:
    """Warn once that a ``wandb_config`` (a ``wandb:`` section) alone no longer logs to W&B.

    In CoMLRL 1.4.3 a ``wandb_config`` turned W&B on; here ``report_to`` alone chooses the sinks,
    so a 1.4.3 run file with a ``wandb:`` section and no ``report_to`` logs nothing to W&B.
    """
    if wandb_config is not None and "wandb" not in (report_to or ()):
        _warn_once(
            "wandb_report_to",
            "a wandb_config (wandb: section) is set but report_to does not name 'wandb', so "
            "nothing is logged to W&B; add report_to: [wandb] to the algorithm's section "
            "(CoMLRL 1.4.3 turned W&B on from wandb_config alone).",
        )
