"""Per-token log-probabilities of completions given their prompts.

:func:`token_logprobs` (and :func:`token_logprobs_parts` for gradient passes under a token
budget) is the one call a trainer makes: it dedupes rows, plans shared-prompt, packed or
padded forwards (:mod:`~comlrl.core.logprobs.planning`) and runs the kernels of
:mod:`~comlrl.core.logprobs.kernels`, returning :class:`TokenLogprobs` (values and mask per
token), at the sampler's ``temperature``. The kernels and planners are exported too, for code
that drives forwards itself.
"""

from comlrl.core.logprobs.engine import (
    distinct_rows,
    sequence_logprobs,
    token_logprobs,
    token_logprobs_parts,
)
from comlrl.core.logprobs.kernels import (
    TokenLogprobs,
    check_temperature,
    completion_logprobs,
    entropy_wanted,
    measuring_entropy,
    pack,
    packed_logprobs,
    packing_verified,
    padded_forward,
    selective_log_softmax,
    shared_prompt_logprobs,
    token_entropy,
)
from comlrl.core.logprobs.planning import (
    FORWARD_COST_TOKENS,
    LAYOUTS,
    length_sorted_micro_batches,
    micro_batches,
    micro_batches_for,
    padded_tokens,
    padding_aware_micro_batches,
    plan,
    plan_forwards,
    shared_prompt_micro_batches,
)

__all__ = [
    "FORWARD_COST_TOKENS",
    "LAYOUTS",
    "TokenLogprobs",
    "check_temperature",
    "completion_logprobs",
    "distinct_rows",
    "entropy_wanted",
    "length_sorted_micro_batches",
    "measuring_entropy",
    "micro_batches",
    "micro_batches_for",
    "pack",
    "packed_logprobs",
    "packing_verified",
    "padded_forward",
    "padded_tokens",
    "padding_aware_micro_batches",
    "plan",
    "plan_forwards",
    "selective_log_softmax",
    "shared_prompt_logprobs",
    "shared_prompt_micro_batches",
    "sequence_logprobs",
    "token_logprobs",
    "token_logprobs_parts",
    "token_entropy",
]
