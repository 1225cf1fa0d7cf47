"""Centralized collaboration: one model writes every role's output in a single completion
(:mod:`~comlrl.core.centralized.collaboration`; the joint layouts are
:mod:`~comlrl.core.centralized.layout`)."""

from __future__ import annotations

from comlrl.core.centralized.collaboration import (
    CentralizedCollaboration,
    CentralizedComparatorAdapter,
    CentralizedComparatorParseError,
    LayoutWindow,
    TaggedCentralizedComparatorAdapter,
    centralize,
    check_adapter,
)

__all__ = [
    "CentralizedComparatorParseError",
    "CentralizedComparatorAdapter",
    "TaggedCentralizedComparatorAdapter",
    "check_adapter",
    "LayoutWindow",
    "CentralizedCollaboration",
    "centralize",
]
