"""Type aliases for the user callables a trainer accepts, for annotating user code.

CoMLRL 1.4.3 exposed these names next to its trainers; they carry no behaviour, only the
shape each callable is expected to have.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

# reward_func(*agent_completions, ...) -> one float per joint sample.
RewardFunc = Callable[..., Sequence[float]]
# metrics_callback(samples) -> extra scalars to log.
MetricsCallback = Callable[[list[Any]], dict[str, float]]
# A decorator-friendly bound: any callable passed through as a reward.
RewardCallable = TypeVar("RewardCallable", bound=Callable[..., Any])
# agent_devices / critic_devices: one device string, or one per agent.
DeviceSpec = str | Sequence[str]
