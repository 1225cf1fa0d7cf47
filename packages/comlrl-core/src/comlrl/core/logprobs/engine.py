"""The one call for completions' log-probs: plan the forwards, dedupe rows, return per-token
values.

:func:`token_logprobs` returns the per-token log-probs of every row (with their mask, so a
loss can form ratios, and the exact per-row sums), computed in forwards of at most
``max_tokens`` tokens. For a gradient pass that must stay within the budget,
:func:`token_logprobs_parts` yields one planned forward at a time, so the caller can backpropagate each part before the next is computed (a loss that is
a sum over rows splits exactly over the parts).

Identical ``(prompt, completion)`` rows are scored once (``dedupe``): the distinct rows are
planned and scored, and each value is indexed by every row that has it, so its gradient sums over
them exactly as if each row were scored alone. Which forwards run is chosen by
:func:`~comlrl.core.logprobs.planning.plan` (``layout``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F

from comlrl.core.logprobs.budget import activation_bytes_per_token, token_budget
from comlrl.core.logprobs.heap import release_after_pass
from comlrl.core.logprobs.kernels import TokenLogprobs, check_rows, check_temperature
from comlrl.core.logprobs.planning import plan


def distinct_rows(
    prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]]
) -> tuple[list[list[int]], list[list[int]], list[int]]:
    """The distinct ``(prompt, completion)`` rows in order of first appearance, and for every
    given row the index of its distinct row."""
    check_rows(prompt_ids, completion_ids)
    index: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    owner = [
        index.setdefault((tuple(p), tuple(c)), len(index))
        for p, c in zip(prompt_ids, completion_ids)
    ]
    return [list(p) for p, _ in index], [list(c) for _, c in index], owner


def _check_budget(max_tokens) -> None:
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise ValueError(f"max_tokens must be None or a positive int, got {max_tokens!r}.")


def _scored_groups(
    model, prompts, comps, pad_id: int, max_tokens, layout: str, temperature: float
) -> Iterator[tuple[list[int], TokenLogprobs]]:
    """(rows, their log-probs) per planned forward, each computed when it is asked for."""
    groups, kernel = plan(model, prompts, comps, max_tokens, pad_id, layout)
    for idx in groups:
        rows_p, rows_c = [prompts[u] for u in idx], [comps[u] for u in idx]
        yield idx, kernel(model, rows_p, rows_c, pad_id, temperature=temperature)


def token_logprobs_parts(
    model,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    max_tokens: int | str | None = None,
    dedupe: bool = True,
    layout: str = "auto",
    temperature: float = 1.0,
) -> Iterator[tuple[list[int], TokenLogprobs]]:
    """Per planned forward, the indices of the given rows it scores and their log-probs
    (``[len(rows), longest completion of the part]`` with a mask).

    Every row appears in exactly one part. Each forward runs at most ``max_tokens`` tokens
    (None: no cap; ``"auto"``: the model's budget, :mod:`comlrl.core.logprobs.budget`) unless
    one row alone is longer, and runs only when the iterator reaches it,
    so ``loss.backward()`` per part keeps one part's graph alive at a time. Gradients flow unless
    the caller disables them. ``dedupe`` scores identical rows once (the rows that share a
    forward's value come out together in its part); ``layout`` is as for
    :func:`~comlrl.core.logprobs.planning.plan`; ``temperature`` is as for :func:`token_logprobs`.
    """
    max_tokens = token_budget(max_tokens, model)
    _check_budget(max_tokens)
    check_rows(prompt_ids, completion_ids)
    temperature = check_temperature(temperature)
    # Runs once the caller drew past the last part, so after its backward: the pass's freed
    # activations go back to the system (see :mod:`comlrl.core.logprobs.heap`).
    activations = _pass_activation_bytes(model, prompt_ids, completion_ids)
    if not dedupe:
        yield from _scored_groups(
            model, prompt_ids, completion_ids, pad_id, max_tokens, layout, temperature
        )
        release_after_pass(activations)
        return
    yield from _deduped_parts(
        model, prompt_ids, completion_ids, pad_id, max_tokens, layout, temperature
    )
    release_after_pass(activations)


def _deduped_parts(
    model, prompt_ids, completion_ids, pad_id: int, max_tokens, layout: str, temperature: float
) -> Iterator[tuple[list[int], TokenLogprobs]]:
    """:func:`token_logprobs_parts` with ``dedupe``: each distinct row scored once, its value
    indexed by every row that has it."""
    prompts, comps, owner = distinct_rows(prompt_ids, completion_ids)
    members: list[list[int]] = [[] for _ in prompts]
    for j, u in enumerate(owner):
        members[u].append(j)
    for idx, lp in _scored_groups(model, prompts, comps, pad_id, max_tokens, layout, temperature):
        if all(len(members[u]) == 1 for u in idx):
            yield [members[u][0] for u in idx], lp
            continue
        at = torch.tensor([k for k, u in enumerate(idx) for _ in members[u]], device=lp.mask.device)
        entropy = None if lp.entropy is None else lp.entropy[at]
        rows = TokenLogprobs(lp.values[at], lp.mask[at], entropy=entropy)
        yield [j for u in idx for j in members[u]], rows


def _pass_activation_bytes(model, prompts, comps) -> int | None:
    """The activations one forward of all these rows would store (no gradient: 0)."""
    if not torch.is_grad_enabled() or next(model.parameters()).device.type != "cpu":
        return 0
    per_token = activation_bytes_per_token(model)
    if per_token is None:
        return None
    return per_token * sum(len(p) + len(c) for p, c in zip(prompts, comps))


def token_logprobs(
    model,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    max_tokens: int | str | None = None,
    grad: bool = False,
    dedupe: bool = True,
    layout: str = "auto",
    temperature: float = 1.0,
) -> TokenLogprobs:
    """Token log-probs of every completion given its prompt under ``model``, rows in the order
    given: ``values`` and ``mask`` are ``[rows, longest completion]`` (EOS scored, pads never),
    and :meth:`~comlrl.core.logprobs.kernels.TokenLogprobs.sequence_sum` gives each row's sum
    as its forward computed it.

    The rows run in forwards of at most ``max_tokens`` tokens (None: no cap; ``"auto"``: the
    model's budget, :mod:`comlrl.core.logprobs.budget`) planned by
    ``layout`` (see :func:`~comlrl.core.logprobs.planning.plan`); with ``dedupe`` each distinct
    ``(prompt, completion)`` row is scored once. With ``grad`` the graphs of every forward are
    kept for one backward (use :func:`token_logprobs_parts` to backpropagate forward by forward);
    without it the forwards run under ``no_grad``. Inside
    :func:`~comlrl.core.logprobs.kernels.measuring_entropy` the result also carries each
    token's entropy (``entropy``), from the same forwards.

    ``temperature`` is the sampler's: each token is scored as ``log_softmax(logits / T)``, the
    tempered distribution before top-k/top-p truncation (see
    :func:`~comlrl.core.logprobs.kernels.check_temperature`); it must be above 0.
    """
    max_tokens = token_budget(max_tokens, model)
    _check_budget(max_tokens)
    check_rows(prompt_ids, completion_ids)
    temperature = check_temperature(temperature)
    prompts: Sequence[Sequence[int]]
    comps: Sequence[Sequence[int]]
    if dedupe:
        prompts, comps, owner = distinct_rows(prompt_ids, completion_ids)
    else:
        prompts, comps, owner = prompt_ids, completion_ids, list(range(len(prompt_ids)))
    if not owner:
        empty = torch.zeros((0, 1), device=next(model.parameters()).device)
        return TokenLogprobs(empty, empty.clone(), empty[:, 0].clone())
    with torch.enable_grad() if grad else torch.no_grad():
        parts = list(_scored_groups(model, prompts, comps, pad_id, max_tokens, layout, temperature))
        width = max(lp.values.shape[1] for _, lp in parts)
        values = torch.cat([F.pad(lp.values, (0, width - lp.values.shape[1])) for _, lp in parts])
        mask = torch.cat([F.pad(lp.mask, (0, width - lp.mask.shape[1])) for _, lp in parts])
        sums = torch.cat([lp.sequence_sum() for _, lp in parts])
        entropy = None
        entropies = [lp.entropy for _, lp in parts]
        if all(e is not None for e in entropies):
            entropy = torch.cat(
                [F.pad(e, (0, width - e.shape[1])) for e in entropies if e is not None]
            )
        position = [0] * len(prompts)
        for k, u in enumerate(u for idx, _ in parts for u in idx):
            position[u] = k
        index = [position[u] for u in owner]
        if index != list(range(len(index))):
            at = torch.tensor(index, device=values.device)
            values, mask, sums = values[at], mask[at], sums[at]
            entropy = None if entropy is None else entropy[at]
    return TokenLogprobs(values, mask, sums, entropy)


def sequence_logprobs(model, prompt_ids, completion_ids, **kwargs) -> torch.Tensor:
    """Each completion's summed token log-probs (``[N]``): :func:`token_logprobs` with the
    same arguments, summed over each row's completion tokens (pads never count)."""
    return token_logprobs(model, prompt_ids, completion_ids, **kwargs).sequence_sum()
