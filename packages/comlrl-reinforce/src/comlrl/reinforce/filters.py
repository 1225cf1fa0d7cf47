"""Which completions and groups an update learns from: truncated completions can be masked out
of the loss (``mask_truncated_completions``) and groups whose returns tie can be dropped
(``drop_zero_variance_groups``)."""

from __future__ import annotations

from collections.abc import Sequence

# A group's returns "tie" when their range is this small relative to their scale.
TIE_TOLERANCE = 1e-9


def is_truncated(completion: Sequence[int], eos_id: int | None, max_new_tokens: int) -> bool:
    """Whether generation stopped at ``max_new_tokens`` before an EOS (completions are stored
    trimmed after their EOS, so a finished one ends with it)."""
    ended = bool(completion) and eos_id is not None and completion[-1] == eos_id
    return not ended and len(completion) >= max_new_tokens


def has_spread(returns: Sequence[float]) -> bool:
    """Whether a group's returns differ (beyond float noise), so a group baseline leaves a
    signal in its advantages."""
    if len(returns) < 2:
        return False
    scale = max(1.0, max(abs(r) for r in returns))
    return max(returns) - min(returns) > TIE_TOLERANCE * scale
