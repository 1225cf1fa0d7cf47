"""The one z-score every family normalizes advantages with."""

from __future__ import annotations

import torch

STD_FLOOR = 1e-6


def zscore(values: torch.Tensor, moments: tuple[float, float, int] | None = None) -> torch.Tensor:
    """``(x - mean) / max(std, 1e-6)`` with the population std.

    ``moments`` (mean, population std, count) replace the values' own statistics: in a
    multi-process run they are pooled over every rank's share. With a count of one there is
    no spread to divide by, and the values are returned unchanged.
    """
    if moments is not None:
        mean, std, count = moments
        if count <= 1:
            return values.clone()
        return (values - mean) / max(std, STD_FLOOR)
    if values.numel() <= 1:
        return values.clone()
    return (values - values.mean()) / values.std(unbiased=False).clamp(min=STD_FLOOR)
