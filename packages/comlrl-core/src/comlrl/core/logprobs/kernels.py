"""The forwards that score completions: padded, shared-prompt and packed rows.

Every kernel takes ``(model, prompt_ids, completion_ids, pad_id)`` and returns the per-token
log-probs of each completion as :class:`TokenLogprobs` (``[rows, longest completion]`` with a
0/1 mask), rows in the order given. EOS (the last real completion token) is scored; pads never
are. The log-softmax is selective: ``logit[token] - logsumexp(logits)`` in fp32, never a
full-vocabulary log-prob tensor. Gradients flow unless the caller disables them.

Memory is bounded at large vocabularies: where a model's logits are its output head applied to
its last hidden states (checked once per class, :func:`head_split`), the kernels run the model
with no logits (:func:`hidden_forward`), keep only the hidden states of the scored positions, and
apply the head and the log-softmax :func:`head_chunk_tokens` positions at a time, each chunk recomputed in backward
(activation checkpointing), so no ``[rows, tokens, vocab]`` logits tensor exists for a whole
forward, neither in the forward nor kept for the backward. Other models get their logits from
``model(...)`` and the log-softmax is chunked over those.

Every kernel takes ``temperature`` (default 1) and scores ``log_softmax(logits / temperature)``:
the distribution a sampler at that temperature draws from before any top-k/top-p truncation
(see :func:`check_temperature`).

Inside :func:`measuring_entropy` the kernels also return each scored token's entropy (of that
same tempered distribution) in :attr:`TokenLogprobs.entropy`. It is computed from the logits
of the chunk that is being scored anyway, under ``no_grad``, so it costs no extra forward and
keeps the memory bound: one chunk's fp32 temporaries at a time (the reward-hacking monitors
read it, :mod:`comlrl.core.monitors`).

- Padded (:func:`completion_logprobs`): rows as ``[left-padded prompt | right-padded
  completion]``, so every completion starts at the same column; position ids come from the
  attention mask, and only the completion columns get logits (``logits_to_keep``).
- Shared prompt (:func:`shared_prompt_logprobs`): each distinct prompt runs once with a KV cache
  and the completions run on top of it.
- Packed (:func:`packed_logprobs`): whole ``prompt + completion`` sequences end to end in rows,
  position ids restarting at 0 for each sequence. transformers' mask builder reads restarting
  positions as separate sequences, so each attends only to itself; whether a model honours that
  is checked once per model class and attention implementation by :func:`packing_verified`.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
import torch.utils.checkpoint

from comlrl.core.logprobs import vocab_grads
from comlrl.core.models.forward_api import cache_argument, forward_takes, returned_cache
from comlrl.core.rollout.generation import left_pad


@dataclass
class TokenLogprobs:
    """Token log-probs ``[B, L]`` with a 0/1 ``mask`` of real completion tokens.

    ``sums``, when set, holds each row's sum as the forward that scored it computed it (at that
    forward's own width): a float sum depends on how many trailing zeros it adds, so rows
    gathered from several forwards keep the sums their kernels gave. ``entropy``, when set
    (scoring inside :func:`measuring_entropy`), is each token's entropy in nats under the
    tempered distribution, laid out as ``values`` (0 at pads), without gradient.
    """

    values: torch.Tensor
    mask: torch.Tensor
    sums: torch.Tensor | None = field(default=None, repr=False)
    entropy: torch.Tensor | None = field(default=None, repr=False)

    def sequence_sum(self) -> torch.Tensor:
        """Sum of token log-probs per sequence."""
        if self.sums is not None:
            return self.sums
        return (self.values * self.mask).sum(-1)

    def lengths(self) -> torch.Tensor:
        """Number of scored tokens per sequence."""
        return self.mask.sum(-1)


# Whether the kernels called in this context also return token entropies (see the module docs):
# None (no), or what every kernel forward is handed to (``_MEASURED``: to nothing).
class EntropySink(Protocol):
    """What :func:`measuring_entropy` hands each kernel forward's entropies to."""

    def add(self, entropy: torch.Tensor, mask: torch.Tensor) -> None:
        """Take one forward's per-token entropies and their mask."""


class _Nowhere:
    """Entropy measured for :attr:`TokenLogprobs.entropy` only."""

    def add(self, entropy: torch.Tensor, mask: torch.Tensor) -> None:
        """Keep nothing."""


_MEASURED = _Nowhere()
_MEASURE_ENTROPY: contextvars.ContextVar[EntropySink | None] = contextvars.ContextVar(
    "comlrl_measure_entropy", default=None
)


@contextmanager
def measuring_entropy(enabled: bool = True, *, into=None) -> Iterator[None]:
    """Within the block, every kernel also fills :attr:`TokenLogprobs.entropy` (``enabled``
    False: the block measures nothing, as outside it). With ``into`` (an object with
    ``add(entropy, mask)``), every kernel forward in the block also hands it its entropies and
    mask. A context variable, so each thread (an agent's worker in mp mode) has its own
    setting."""
    value = (_MEASURED if into is None else into) if enabled else None
    token = _MEASURE_ENTROPY.set(value)
    try:
        yield
    finally:
        _MEASURE_ENTROPY.reset(token)


def entropy_wanted() -> bool:
    """Whether the kernels are asked for token entropies here (:func:`measuring_entropy`)."""
    return _MEASURE_ENTROPY.get() is not None


def _measured(lp: TokenLogprobs) -> TokenLogprobs:
    """``lp``, handed to the ``measuring_entropy(into=...)`` object first when there is one."""
    meter = _MEASURE_ENTROPY.get()
    if lp.entropy is not None and meter is not None and meter is not _MEASURED:
        meter.add(lp.entropy, lp.mask)
    return lp


def check_rows(prompt_ids: Sequence, completion_ids: Sequence) -> None:
    """Raise ValueError unless there is one completion per prompt."""
    if len(prompt_ids) != len(completion_ids):
        raise ValueError(
            f"prompt_ids and completion_ids must have the same length, got {len(prompt_ids)} "
            f"prompts and {len(completion_ids)} completions."
        )


def pack(prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]], pad_id: int):
    """Build ``input_ids``, ``attention_mask``, ``position_ids`` and the completion mask."""
    check_rows(prompt_ids, completion_ids)
    p_width = max(len(p) for p in prompt_ids)
    c_width = max(1, max(len(c) for c in completion_ids))
    b = len(prompt_ids)
    ids = torch.full((b, p_width + c_width), pad_id, dtype=torch.long)
    attn = torch.zeros((b, p_width + c_width), dtype=torch.long)
    comp_mask = torch.zeros((b, c_width), dtype=torch.float32)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        ids[i, p_width - len(p) : p_width] = torch.tensor(list(p), dtype=torch.long)
        attn[i, p_width - len(p) : p_width] = 1
        if c:
            ids[i, p_width : p_width + len(c)] = torch.tensor(list(c), dtype=torch.long)
            attn[i, p_width : p_width + len(c)] = 1
            comp_mask[i, : len(c)] = 1.0
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    return ids, attn, positions, comp_mask, p_width, c_width


def check_temperature(temperature) -> float:
    """``temperature`` as a float if it is a finite number above 0; a ValueError otherwise.

    Scores are taken from the tempered but untruncated distribution ``softmax(logits / T)``:
    top-k/top-p only remove tokens the sampler did not draw, and renormalising over the kept set
    would make a token's log-prob jump whenever the set changes between the rollout and the
    update. Greedy decoding has no tempered distribution (T -> 0 is a point mass), so 0 is refused
    rather than read as 1: a caller scoring greedy output says ``temperature=1`` explicitly.
    """
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}.")
    value = float(temperature)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"temperature must be a finite number above 0 (1 scores the raw logits), got "
            f"{temperature!r}."
        )
    return value


def _takes_logits_to_keep(model) -> bool:
    return forward_takes(type(model), "logits_to_keep")


def selective_log_softmax(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """``log softmax(logits / temperature)[targets]`` computed in fp32 without materialising
    all log-probs."""
    temperature = check_temperature(temperature)
    logits = logits.float()
    if temperature != 1.0:
        # Divided after the cast, so half-precision logits are not rounded a second time.
        logits = logits / temperature
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


@torch.no_grad()
def token_entropy(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Entropy in nats of ``softmax(logits / temperature)`` over the last axis, in fp32 and
    without gradient: ``logsumexp(z) - sum(softmax(z) * z)`` for ``z = logits / T``. It holds
    one temporary the size of ``logits`` (the probabilities, multiplied in place)."""
    z = logits.float()
    if temperature != 1.0:
        z = z / temperature
    lse = torch.logsumexp(z, dim=-1)
    return lse - torch.softmax(z, dim=-1).mul_(z).sum(-1)


def logprobs_and_entropy(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`selective_log_softmax` and :func:`token_entropy` of the same logits, sharing the
    tempered fp32 logits and their ``logsumexp`` (the entropy carries no gradient)."""
    temperature = check_temperature(temperature)
    z = logits.float()
    if temperature != 1.0:
        z = z / temperature
    lse = torch.logsumexp(z, dim=-1)
    lp = z.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    with torch.no_grad():
        zd, lsed = z.detach(), lse.detach()
        ent = lsed - (zd - lsed.unsqueeze(-1)).exp_().mul_(zd).sum(-1)
    return lp, ent


def _scored(logits: torch.Tensor, targets: torch.Tensor, temperature: float, entropy: bool):
    """(selected-token log-probs, their entropies or None) of one chunk of logits."""
    if entropy:
        return logprobs_and_entropy(logits, targets, temperature)
    return selective_log_softmax(logits, targets, temperature), None


# fp32 logits elements one chunk may hold: at most 2**26 (256 MiB), at least 2**22 (16 MiB), and
# in between as many as the output head has weights (vocab x hidden): the scoring peak then
# stays within a small multiple of the head's own size.
HEAD_CHUNK_MAX_ELEMENTS = 2**26
HEAD_CHUNK_MIN_ELEMENTS = 2**22
# Head outputs up to this many elements (16 MiB of fp32 logits: 1,000 positions at vocab 4,096)
# keep their logits for the backward instead of recomputing them: recomputation saves no
# memory worth having there, and its bookkeeping costs a small model more than the head itself.
HEAD_KEEP_MAX_ELEMENTS = 2**22


def head_chunk_tokens(vocab_size: int, hidden_size: int) -> int:
    """How many positions one chunk of the output head and log-softmax scores: its fp32 logits
    take ``vocab x hidden`` elements (the head's weight count), kept within
    [:data:`HEAD_CHUNK_MIN_ELEMENTS`, :data:`HEAD_CHUNK_MAX_ELEMENTS`]. At vocab 151,936 that is
    441 positions (256 MiB); a 512-token vocabulary gets 8,192 (no chunking in practice)."""
    if vocab_size < 1 or hidden_size < 1:
        raise ValueError(
            f"vocab_size and hidden_size must be positive, got {vocab_size} and {hidden_size}."
        )
    elements = min(HEAD_CHUNK_MAX_ELEMENTS, max(HEAD_CHUNK_MIN_ELEMENTS, vocab_size * hidden_size))
    return max(1, elements // vocab_size)


def _chunk_logprobs(head, hidden: torch.Tensor, targets: torch.Tensor, temperature: float):
    return selective_log_softmax(head(hidden), targets, temperature)


def _chunk_scores(head, hidden: torch.Tensor, targets: torch.Tensor, temperature: float):
    """A checkpointed chunk that also measures entropy: both from one head application."""
    return logprobs_and_entropy(head(hidden), targets, temperature)


def chunked_head_logprobs(
    head, hidden: torch.Tensor, targets: torch.Tensor, temperature: float, chunk: int
) -> torch.Tensor:
    """``log softmax(head(hidden) / temperature)[targets]`` for ``hidden`` ``[N, H]``, ``chunk``
    positions at a time.

    With gradients on, each chunk is checkpointed: only its hidden states are kept, and its
    logits are recomputed during backward, so at most one chunk's logits exist at any time.
    """
    return head_scores(head, hidden, targets, temperature, chunk, entropy=False)[0]


def head_scores(
    head,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    temperature: float,
    chunk: int,
    *,
    entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`chunked_head_logprobs` and, with ``entropy``, each position's token entropy
    (``[N]``, no gradient) from the same chunks' logits; None otherwise."""
    if hidden.shape[0] == 0:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty.clone() if entropy else None
    grad = torch.is_grad_enabled() and (
        hidden.requires_grad or any(p.requires_grad for p in head.parameters())
    )
    if grad and vocab_grads.head_sinks(head):
        return vocab_grads.head_logprobs(
            head,
            hidden,
            targets,
            chunk,
            lambda logits, t: selective_log_softmax(logits, t, temperature),
            measure=(lambda logits: token_entropy(logits, temperature)) if entropy else None,
        )
    if grad and hidden.shape[0] * _head_vocab(head, hidden) <= HEAD_KEEP_MAX_ELEMENTS:
        return _scored(head(hidden), targets, temperature, entropy)
    parts, ents = [], []
    for start in range(0, hidden.shape[0], chunk):
        h, t = hidden[start : start + chunk], targets[start : start + chunk]
        if grad and entropy:
            # Non-reentrant checkpointing returns both; the backward recomputes the chunk's
            # logits for the log-probs only (the entropy carries no gradient).
            lp, ent = torch.utils.checkpoint.checkpoint(
                _chunk_scores, head, h, t, temperature, use_reentrant=False
            )
        elif grad:
            lp, ent = (
                torch.utils.checkpoint.checkpoint(
                    _chunk_logprobs, head, h, t, temperature, use_reentrant=False
                ),
                None,
            )
        else:
            lp, ent = _scored(head(h), t, temperature, entropy)
        parts.append(lp)
        ents.append(ent)
    values = parts[0] if len(parts) == 1 else torch.cat(parts)
    return values, (torch.cat(ents).detach() if entropy else None)


def _head_vocab(head, hidden: torch.Tensor) -> int:
    """The output width of ``head`` (its weight's rows; for a head of another shape, what one
    position gives, measured without gradient)."""
    weight = getattr(head, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.dim() == 2:
        return int(weight.shape[0])
    with torch.no_grad():
        return int(head(hidden[:1]).shape[-1])


def chunked_log_softmax(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float, chunk: int
) -> torch.Tensor:
    """:func:`selective_log_softmax` over ``logits`` ``[rows, ..., vocab]``, whole rows at a
    time and about ``chunk`` positions per piece, so its fp32 temporaries stay one piece large
    (for models whose logits come whole)."""
    return log_softmax_scores(logits, targets, temperature, chunk, entropy=False)[0]


def log_softmax_scores(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float, chunk: int, *, entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`chunked_log_softmax` and, with ``entropy``, every position's token entropy (laid
    out as the log-probs, no gradient) from the same pieces; None otherwise."""
    per_row = max(1, math.prod(logits.shape[1:-1]))
    rows = max(1, chunk // per_row)
    if logits.shape[0] <= rows:
        return _scored(logits, targets, temperature, entropy)
    pieces = [
        _scored(logits[s : s + rows], targets[s : s + rows], temperature, entropy)
        for s in range(0, logits.shape[0], rows)
    ]
    values = torch.cat([lp for lp, _ in pieces])
    return values, torch.cat([e for _, e in pieces]) if entropy else None


# (model class, head class, attention implementation) -> whether logits == head(last hidden)
_SPLIT: dict[tuple[type, type, str], bool] = {}

# ``logits_to_keep`` as an empty index tensor: the model runs its body and no head at all.
_NO_LOGITS = torch.zeros(0, dtype=torch.long)


def hidden_forward(model, **kwargs):
    """``model(**kwargs)`` with no logits computed: returns its output and the last hidden
    states (the head's input), for a model that :func:`head_split` accepts."""
    device = kwargs["input_ids"].device
    kwargs.update(logits_to_keep=_NO_LOGITS.to(device), output_hidden_states=True)
    embedding = model.get_input_embeddings()
    if torch.is_grad_enabled() and embedding.weight.requires_grad and _embeds_ready(model):
        kwargs["inputs_embeds"] = vocab_grads.embed(embedding, kwargs.pop("input_ids"))
    out = model(**kwargs)
    return out, out.hidden_states[-1]


# (model class, embedding class, attention implementation) -> whether the model's output from
# ``inputs_embeds`` looked up by :func:`vocab_grads.embed` equals its output from ``input_ids``
_EMBEDS: dict[tuple[type, type, str], bool] = {}


def _embeds_ready(model) -> bool:
    """Whether :func:`hidden_forward` may look the ids up itself (:func:`vocab_grads.embed`, so
    the embedding's gradient is added in place): a large plain embedding, a model that takes
    ``inputs_embeds`` and gives the same output from them (checked once per class on a probe:
    models that scale or mix in other inputs after their own lookup fail it)."""
    embedding = model.get_input_embeddings()
    if not vocab_grads.embedding_sinks(embedding) or not forward_takes(
        type(model), "inputs_embeds"
    ):
        return False
    config = getattr(model, "config", None)
    key = (type(model), type(embedding), str(getattr(config, "_attn_implementation", None)))
    if key not in _EMBEDS:
        vocab = embedding.num_embeddings
        ids = torch.tensor(
            [[(7 * k + 1) % vocab for k in range(6)]], device=embedding.weight.device
        )
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                plain = model(input_ids=ids, use_cache=False, logits_to_keep=1).logits.float()
                looked = model(
                    inputs_embeds=embedding(ids), use_cache=False, logits_to_keep=1
                ).logits.float()
        except (TypeError, ValueError, AttributeError, IndexError):
            _EMBEDS[key] = False
        else:
            _EMBEDS[key] = plain.shape == looked.shape and torch.equal(plain, looked)
        finally:
            model.train(was_training)
    return _EMBEDS[key]


def head_split(model):
    """The output head of ``model`` when its logits are exactly that head applied to its last
    hidden states (``hidden_states[-1]``) and it can skip computing them
    (``logits_to_keep``), else None.

    Checked once per model class, head class and attention implementation on a short probe in
    eval mode: models that change the logits after the head (soft-capping, scaling) fail the
    check and keep their own logits (then only the log-softmax is chunked).
    """
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if get_head is not None else None
    if head is None or not _takes_logits_to_keep(model):
        return None
    config = getattr(model, "config", None)
    key = (type(model), type(head), str(getattr(config, "_attn_implementation", None)))
    if key not in _SPLIT:
        vocab = model.get_input_embeddings().num_embeddings
        device = next(model.parameters()).device
        ids = torch.tensor([[(7 * k + 1) % vocab for k in range(6)]], device=device)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                whole = model(input_ids=ids, use_cache=False).logits.float()
                out, hidden = hidden_forward(model, input_ids=ids, use_cache=False)
                split = head(hidden).float()
        except (TypeError, AttributeError, IndexError):
            _SPLIT[key] = False
        else:
            scale = 1.0 + whole.abs().max().item()
            _SPLIT[key] = (
                out.logits.numel() == 0
                and split.shape == whole.shape
                and (split - whole).abs().max().item() <= 1e-3 * scale
            )
        finally:
            model.train(was_training)
    return head if _SPLIT[key] else None


def _vocab_hidden(model, head) -> tuple[int, int]:
    weight = getattr(head, "weight", None)
    if weight is not None and weight.dim() == 2:
        return int(weight.shape[0]), int(weight.shape[1])
    config = model.config
    return int(config.vocab_size), int(getattr(config, "hidden_size", 1))


def _logits_chunk(model) -> int:
    """:func:`head_chunk_tokens` for a model whose logits come whole."""
    config = getattr(model, "config", None)
    vocab = getattr(config, "vocab_size", None) or model.get_input_embeddings().num_embeddings
    hidden = getattr(config, "hidden_size", None) or 1
    return head_chunk_tokens(int(vocab), int(hidden))


def score_hidden(model, head, hidden: torch.Tensor, targets: torch.Tensor, temperature: float):
    """Selected-token log-probs of ``targets`` ``[N]`` from ``hidden`` ``[N, H]`` through
    ``head``, in :func:`head_chunk_tokens` chunks (see :func:`chunked_head_logprobs`)."""
    return _hidden_scores(model, head, hidden, targets, temperature, entropy=False)[0]


def _hidden_scores(model, head, hidden, targets, temperature: float, *, entropy: bool):
    chunk = head_chunk_tokens(*_vocab_hidden(model, head))
    head_device = next(head.parameters()).device
    return head_scores(
        head,
        hidden.to(head_device),
        targets.to(head_device),
        temperature,
        chunk,
        entropy=entropy,
    )


def _score_columns(
    model, head, states: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, temperature
) -> TokenLogprobs:
    """Log-probs ``[rows, columns]`` of ``targets`` from ``states``: hidden states
    ``[rows, columns, H]`` through ``head`` (only the real tokens of ``mask``; pads get 0), or,
    with ``head`` None, logits ``[rows, columns, vocab]`` (every column); with the token
    entropies in the same layout inside :func:`measuring_entropy`."""
    entropy = entropy_wanted()
    if head is None:
        values, ent = log_softmax_scores(
            states, targets, temperature, _logits_chunk(model), entropy=entropy
        )
        return _measured(TokenLogprobs(values, mask, entropy=None if ent is None else ent * mask))
    rows, cols = mask.shape
    where = mask.reshape(-1).nonzero().squeeze(-1).to(states.device)
    hidden = states.reshape(rows * cols, states.shape[-1])[where]
    lp, ent = _hidden_scores(
        model,
        head,
        hidden,
        targets.reshape(-1).to(states.device)[where],
        temperature,
        entropy=entropy,
    )
    at = (where.to(lp.device),)
    values = torch.zeros(rows * cols, device=lp.device, dtype=torch.float32).index_put(at, lp)
    if ent is not None:
        ent = torch.zeros(rows * cols, device=lp.device).index_put(at, ent).view(rows, cols)
    return _measured(TokenLogprobs(values.view(rows, cols), mask, entropy=ent))


def padded_forward(
    model, prompt_ids, completion_ids, pad_id: int, temperature: float = 1.0, **forward_kwargs
):
    """One padded forward of ``[prompt | completion]`` rows (see :func:`pack`), scored at
    ``temperature``.

    Returns the completion log-probs, the model's output (for callers that read more of it,
    such as hidden states with ``output_hidden_states=True``; its ``logits`` are empty where
    :func:`head_split` holds) and the prompt width.
    """
    ids, attn, pos, comp_mask, p_width, c_width = pack(prompt_ids, completion_ids, pad_id)
    device = next(model.parameters()).device
    kwargs = dict(
        input_ids=ids.to(device),
        attention_mask=attn.to(device),
        position_ids=pos.to(device),
        use_cache=False,
        **forward_kwargs,
    )
    targets, comp_mask = ids[:, p_width:].to(device), comp_mask.to(device)
    head = head_split(model)
    if head is not None:
        out, hidden = hidden_forward(model, **kwargs)
        # Column p_width-1 predicts the first completion token.
        states = hidden[:, p_width - 1 : -1]
        return _score_columns(model, head, states, targets, comp_mask, temperature), out, p_width
    keep = _takes_logits_to_keep(model)
    if keep:
        # Column p_width-1 predicts the first completion token; keep c_width+1 columns.
        kwargs["logits_to_keep"] = c_width + 1
    out = model(**kwargs)
    logits = out.logits[:, :-1] if keep else out.logits[:, p_width - 1 : -1]
    return _score_columns(model, None, logits, targets, comp_mask, temperature), out, p_width


def completion_logprobs(
    model, prompt_ids, completion_ids, pad_id: int, temperature: float = 1.0
) -> TokenLogprobs:
    """Token log-probs of each completion under ``model`` at ``temperature`` in one padded
    forward.

    Gradients flow when called outside ``no_grad``; wrap in ``torch.no_grad()`` for reference
    or old-policy scoring.
    """
    return padded_forward(model, prompt_ids, completion_ids, pad_id, temperature)[0]


def prompt_sharing_ready(model) -> bool:
    """Whether ``model`` can score completions on top of a gathered prompt KV cache."""
    from transformers import PreTrainedModel

    if not isinstance(model, PreTrainedModel) or model.config.is_encoder_decoder:
        return False
    # Checkpointed training turns the KV cache off (transformers renamed the flag in v5).
    checkpointing = getattr(model, "is_activation_checkpointing", None)
    if checkpointing is None:
        checkpointing = getattr(model, "is_gradient_checkpointing", False)
    if model.training and checkpointing:
        return False
    cls = type(model)
    return cache_argument(cls) is not None and forward_takes(cls, "position_ids")


def shared_prompt_logprobs(
    model, prompt_ids, completion_ids, pad_id: int, temperature: float = 1.0
) -> TokenLogprobs:
    """:func:`completion_logprobs`, encoding each distinct prompt once.

    Rows that share a prompt (a prompt's K samples) share one prompt forward: the distinct
    prompts run first with a KV cache, the cache is gathered per row, and the completions run on
    top of it. The values equal :func:`completion_logprobs` up to float rounding, and gradients
    flow through both passes. Models that cannot take a cache this way (wrappers, encoder-decoder
    models, gradient checkpointing in training) and batches without a repeated prompt use
    :func:`completion_logprobs` itself.
    """
    check_rows(prompt_ids, completion_ids)
    keys: dict[tuple[int, ...], int] = {}
    owner = [keys.setdefault(tuple(p), len(keys)) for p in prompt_ids]
    c_width = max((len(c) for c in completion_ids), default=0)
    if len(keys) == len(prompt_ids) or c_width == 0 or not prompt_sharing_ready(model):
        return completion_logprobs(model, prompt_ids, completion_ids, pad_id, temperature)
    device = next(model.parameters()).device
    ids, mask = left_pad([list(k) for k in keys], pad_id)
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    head = head_split(model)
    prompt_kwargs = dict(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    if head is not None:
        prefix, prefix_hidden = hidden_forward(model, **prompt_kwargs)
    else:
        keep = {"logits_to_keep": 1} if _takes_logits_to_keep(model) else {}
        prefix = model(**prompt_kwargs, **keep)
    cache = returned_cache(prefix)
    cache_arg = cache_argument(type(model))
    if cache is None or cache_arg is None or not hasattr(cache, "batch_select_indices"):
        return completion_logprobs(model, prompt_ids, completion_ids, pad_id, temperature)
    rows = torch.tensor(owner, device=device)
    cache.batch_select_indices(rows)
    b = len(completion_ids)
    comp = torch.full((b, c_width), pad_id, dtype=torch.long)
    comp_mask = torch.zeros((b, c_width), dtype=torch.float32)
    for i, c in enumerate(completion_ids):
        if c:
            comp[i, : len(c)] = torch.tensor(list(c), dtype=torch.long)
            comp_mask[i, : len(c)] = 1.0
    comp, comp_mask = comp.to(device), comp_mask.to(device)
    attn = torch.cat([mask[rows], comp_mask.long()], dim=1)
    comp_pos = pos[rows][:, -1:] + 1 + torch.arange(c_width, device=device)[None]
    comp_kwargs: dict[str, Any] = dict(
        input_ids=comp, attention_mask=attn, position_ids=comp_pos, use_cache=True
    )
    comp_kwargs[cache_arg] = cache
    # The prompt's last position predicts the first completion token.
    if head is None:
        out = model(**comp_kwargs)
        states = torch.cat([prefix.logits[:, -1:][rows], out.logits[:, :-1]], dim=1)
    else:
        _, hidden = hidden_forward(model, **comp_kwargs)
        states = torch.cat([prefix_hidden[:, -1:][rows], hidden[:, :-1]], dim=1)
    return _score_columns(model, head, states, comp, comp_mask, temperature)


def bins_next_fit(lengths: Sequence[int], width: int) -> list[list[int]]:
    """Indices in order, a new bin whenever the next length does not fit ``width``. Rows
    listed bin by bin from :func:`~comlrl.core.logprobs.planning.bins_first_fit` come back in
    at most as many bins."""
    bins: list[list[int]] = []
    free = 0
    for i, n in enumerate(lengths):
        if not bins or n > free:
            bins.append([])
            free = width
        bins[-1].append(i)
        free -= n
    return bins


def _packed_forward(
    model, rows: Sequence[Sequence[int]], pad_id: int, width: int | None = None, hidden=False
) -> tuple[torch.Tensor, list]:
    """Logits ``[bins, width, vocab]`` of ``rows`` packed in order into bins ``width`` wide
    (default: the longest row), and each row's ``(bin, offset)``; with ``hidden``, the last
    hidden states ``[bins, width, H]`` instead (see :func:`hidden_forward`)."""
    lengths = [len(r) for r in rows]
    width = max(max(lengths), width or 0)
    bins = bins_next_fit(lengths, width)
    ids = torch.full((len(bins), width), pad_id, dtype=torch.long)
    pos = torch.zeros((len(bins), width), dtype=torch.long)
    place: list = [None] * len(rows)
    for b, members in enumerate(bins):
        offset = 0
        for i in members:
            n = lengths[i]
            ids[b, offset : offset + n] = torch.tensor(list(rows[i]), dtype=torch.long)
            pos[b, offset : offset + n] = torch.arange(n)
            place[i] = (b, offset)
            offset += n
        # Trailing pads continue the last sequence's positions: they join it, and causal
        # attention keeps them out of every real token's view.
        last = lengths[members[-1]]
        pos[b, offset:] = torch.arange(last, last + width - offset)
    device = next(model.parameters()).device
    kwargs = dict(input_ids=ids.to(device), position_ids=pos.to(device), use_cache=False)
    if hidden:
        return hidden_forward(model, **kwargs)[1], place
    return model(**kwargs).logits, place


def packed_logprobs(
    model,
    prompt_ids,
    completion_ids,
    pad_id: int,
    width: int | None = None,
    temperature: float = 1.0,
) -> TokenLogprobs:
    """Token log-probs of each completion, as :func:`completion_logprobs` returns them, from one
    forward of the ``prompt + completion`` sequences packed in order (next fit) into rows
    ``width`` wide (default: the longest sequence), scored at ``temperature``.

    The caller checks :func:`packing_verified` (or plans with
    :func:`~comlrl.core.logprobs.planning.plan_forwards`) first. Prompts must not be empty.
    """
    check_rows(prompt_ids, completion_ids)
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("packed_logprobs needs a non-empty prompt for every row.")
    rows = [list(p) + list(c) for p, c in zip(prompt_ids, completion_ids)]
    head = head_split(model)
    states, place = _packed_forward(model, rows, pad_id, width, hidden=head is not None)
    device = states.device
    c_width = max(1, max(len(c) for c in completion_ids))
    bins: list[int] = []
    cols: list[int] = []
    targets: list[int] = []
    slots: list[int] = []
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        b, offset = place[i]
        start = offset + len(p) - 1  # the position before each completion token predicts it
        bins.extend([b] * len(c))
        cols.extend(range(start, start + len(c)))
        targets.extend(c)
        slots.extend(range(i * c_width, i * c_width + len(c)))
    values = torch.zeros(len(rows) * c_width, device=device, dtype=torch.float32)
    mask = torch.zeros(len(rows), c_width, dtype=torch.float32)
    entropy = entropy_wanted()
    ent = torch.zeros_like(values) if entropy else None
    if targets:
        picked = states[torch.tensor(bins, device=device), torch.tensor(cols, device=device)]
        wanted = torch.tensor(targets, device=device)
        if head is None:
            lp, picked_ent = log_softmax_scores(
                picked, wanted, temperature, _logits_chunk(model), entropy=entropy
            )
        else:
            lp, picked_ent = _hidden_scores(
                model, head, picked, wanted, temperature, entropy=entropy
            )
        at = (torch.tensor(slots, device=device),)
        values = values.index_put(at, lp)
        if ent is not None and picked_ent is not None:
            ent = ent.index_put(at, picked_ent.to(device))
        for i, c in enumerate(completion_ids):
            mask[i, : len(c)] = 1.0
    shape = (len(rows), c_width)
    per_token = None if ent is None else ent.view(shape)
    return _measured(TokenLogprobs(values.view(shape), mask.to(device), entropy=per_token))


# (model class, attention implementation) -> whether packed rows keep sequences apart
_VERIFIED: dict[tuple[type, str], bool] = {}


def _packable(model) -> bool:
    from transformers import PreTrainedModel

    if not isinstance(model, PreTrainedModel) or model.config.is_encoder_decoder:
        return False
    return forward_takes(type(model), "position_ids")


def packing_verified(model, pad_id: int) -> bool:
    """Whether ``model`` keeps packed sequences apart, checked once per class and attention
    implementation: a short sequence packed after another must score as it does alone, much
    closer than when it is simply appended (and so sees the first one). The contrast, rather
    than a fixed tolerance, keeps the check meaningful in half precision."""
    if not _packable(model):
        return False
    key = (type(model), str(getattr(model.config, "_attn_implementation", None)))
    if key not in _VERIFIED:
        vocab = model.get_input_embeddings().num_embeddings
        a = [(7 * k + 1) % vocab for k in range(5)]
        b = [(11 * k + 3) % vocab for k in range(3)]
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                packed, place = _packed_forward(model, [a, b], pad_id, width=len(a) + len(b))
                alone = model(input_ids=torch.tensor([b], device=device), use_cache=False).logits
                appended = model(input_ids=torch.tensor([a + b], device=device), use_cache=False)
        finally:
            model.train(was_training)
        if place[1] != (0, len(a)):  # the probe must share one row to test anything
            raise RuntimeError(f"packing probe placed its rows at {place}")
        alone = alone[0].float()
        apart = (packed[0, len(a) :].float() - alone).abs().max().item()
        seen = (appended.logits[0, len(a) :].float() - alone).abs().max().item()
        _VERIFIED[key] = seen > 0 and apart < 0.1 * seen
    return _VERIFIED[key]
