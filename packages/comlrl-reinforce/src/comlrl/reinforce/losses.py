"""The loss aggregations of the REINFORCE family: how each completion's row weighs in a
mini-batch loss (``loss_aggregation``). The policy losses themselves are core's registered
functions (:mod:`comlrl.core.algos.losses`)."""

from __future__ import annotations

from collections.abc import Sequence


def row_weights(
    lengths: Sequence[int],
    group_sizes: Sequence[int],
    num_groups: int,
    mode: str,
    max_tokens: int,
    keep: Sequence[bool] | None = None,
    token_total: float | None = None,
) -> list[float]:
    """Each completion's weight in a mini-batch loss of ``num_groups`` groups (``mode`` is a
    ``loss_aggregation``), so that ``sum_r w_r * (sum of row r's token terms)`` is the loss.

    ``sum``, ``sequence_mean`` and ``constant``: every group (a node's K completions of one
    prompt) counts equally, a row of a group of K weighing ``1 / (K * num_groups)``, further
    divided by the row's own length (``sequence_mean``) or by ``max_tokens`` (``constant``).
    ``token_mean`` (DAPO): every token of the mini-batch weighs ``1 / (its total tokens)``.
    Rows with ``keep`` False (masked truncated completions) weigh 0 and their tokens do not
    count in ``token_mean``'s total. ``token_total`` replaces that total (see
    :func:`token_mean_total`: several ranks share one global token mean)."""
    keep = [True] * len(lengths) if keep is None else list(keep)
    if mode == "token_mean":
        total = kept_tokens(lengths, keep) if token_total is None else token_total
        return [1.0 / max(1.0, total) if kept else 0.0 for kept in keep]
    out = []
    for length, k, kept in zip(lengths, group_sizes, keep):
        w = 1.0 / (k * num_groups)
        if mode == "sequence_mean":
            w /= max(1, length)
        elif mode == "constant":
            w /= max_tokens
        out.append(w if kept else 0.0)
    return out


def kept_tokens(lengths: Sequence[int], keep: Sequence[bool] | None = None) -> int:
    """The number of tokens of the rows that stay in the loss."""
    keep = [True] * len(lengths) if keep is None else keep
    return sum(length for length, kept in zip(lengths, keep) if kept)


def token_mean_total(pooled_tokens: float, world_size: int) -> float:
    """The per-rank ``token_mean`` divisor that makes DAPO's token mean global over ranks.

    Gradients are averaged over the ``world_size`` ranks, so a token weighed ``1 / D`` on its
    rank weighs ``1 / (D · world_size)`` in the step; ``D = pooled_tokens / world_size`` (the
    kept tokens of every rank's mini-batch together) gives each token ``1 / pooled_tokens``,
    whatever share of the tokens its rank holds."""
    return float(pooled_tokens) / int(world_size)
