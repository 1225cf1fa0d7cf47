"""Type aliases for the user callables a trainer accepts, for annotating user code.

CoMLRL 1.4.3 exposed these names next to its trainers; they carry no behaviour, only the
shape each callable is expected to have.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# reward_func(*agent_completions, ...) -> one float per joint sample.
RewardFunc = Callable[..., Sequence[float]]
# metrics_callback(samples) -> extra scalars to log.
MetricsCallback = Callable[[list[Any]], dict[str, float]]
# A decorator-friendly bound: any callable passed through as a reward.
RewardCallable = TypeVar("RewardCallable", bound=Callable[..., Any])
# agent_devices / critic_devices: one device string, or one per agent.
DeviceSpec = str | Sequence[str]

# What the trainers' constructors take (written as strings: transformers and datasets are only
# imported by a type checker here).
# A model: a hub id or local directory, or a loaded model.
ModelSource: TypeAlias = "str | PreTrainedModel"
# One tokenizer for every agent, or one per agent.
TokenizerArg: TypeAlias = "PreTrainedTokenizerBase | Sequence[PreTrainedTokenizerBase]"
# A dataset of items (a `datasets.Dataset` or a list of dicts).
DatasetArg: TypeAlias = "Dataset | Sequence[dict[str, Any]]"
# formatters: item -> prompt, one for every agent or one per agent.
FormatterArg: TypeAlias = (
    "Callable[[dict[str, Any]], str] | Sequence[Callable[[dict[str, Any]], str]]"
)
# One reward function, or several (summed with `reward_weights`).
RewardArg: TypeAlias = "RewardFunc | Sequence[RewardFunc]"
# reward_processor: a float transform applied to every reward.
RewardProcessor: TypeAlias = "Callable[[float], float]"
# external_transition, eval_logger and eval_aggregator: called with the documented arguments.
Hook: TypeAlias = "Callable[..., Any]"
