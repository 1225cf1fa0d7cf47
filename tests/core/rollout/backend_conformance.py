"""The behaviours every rollout backend must show, as a reusable pytest class.

A backend's test module subclasses :class:`BackendConformance` (its name starts with ``Test``)
and provides a ``harness`` fixture returning a :class:`Harness`: the backend under test, the
trainer-side models and tokenizers it serves, and how to change an agent's weights. The HF
backend runs it on CPU (test_hf_conformance.py), the vLLM logic layer runs it over an
in-process fake engine (test_vllm_conformance.py), and the real vLLM engine runs it on a GPU
(test_vllm_gpu_conformance.py, skipped without vLLM and CUDA; benchmarks/gpu_check.sh runs it).

What is checked: ids in and ids out (the text form is the same sampling); at most
``max_new_tokens`` tokens; a row ends at its first EOS or at the cap; n samples per prompt;
seeds reproduce regardless of batch composition; greedy decoding is deterministic; sampler
log-probs (where reported) have one finite value <= 0 per token and agree with the trainer's
own score at the sampling temperature; a weight update shows in the next rollout; updating one
agent leaves another agent's rollouts unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from comlrl.core.logprobs.engine import token_logprobs
from comlrl.core.rollout.backends.text import with_text
from comlrl.core.rollout.generation import SamplingParams, tokenize_prompts
from comlrl.core.testing import prompts

MAX_NEW = 8
K = 4
SEEDS = [11, 12, 13]


@dataclass
class Harness:
    """A backend and what the suite needs around it.

    ``update(agent)`` changes that agent's trained weights (in place) and tells the backend,
    as :func:`comlrl.core.training.optim.apply_step` does. ``logprob_tolerance`` bounds the mean
    |sampler - trainer| token log-prob (None: the backend reports no log-probs)."""

    backend: Any
    models: Sequence[Any]
    tokenizers: Sequence[Any]
    update: Callable[[int], None]
    logprob_tolerance: float | None = None


def sampling(**kw) -> SamplingParams:
    """Plain sampling at T=1 without truncation, so every token's log-prob is comparable."""
    base = dict(max_new_tokens=MAX_NEW, temperature=1.0, top_p=1.0, top_k=None)
    base.update(kw)
    return SamplingParams(**base)


def prompt_ids(h: Harness, agent: int = 0, num: int = 3) -> list[list[int]]:
    return tokenize_prompts(h.tokenizers[agent], prompts(num))


def eos_ids(h: Harness, agent: int) -> set[int]:
    ids = {h.tokenizers[agent].eos_token_id}
    cfg = getattr(h.models[agent].generation_config, "eos_token_id", None)
    ids.update(cfg if isinstance(cfg, (list, tuple)) else [cfg] if cfg is not None else [])
    return {int(i) for i in ids if i is not None}


def perturb(model, seed: int = 0, scale: float = 0.5) -> None:
    """Add seeded noise to every trainable parameter (a stand-in for an optimizer step)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                noise = torch.randn(p.shape, generator=gen, dtype=torch.float32) * scale
                p.add_(noise.to(device=p.device, dtype=p.dtype))


class BackendConformance:
    """Subclass as ``Test<Backend>Conformance`` with a ``harness`` fixture."""

    def test_ids_in_ids_out(self, harness):
        ids = prompt_ids(harness)
        out = harness.backend.generate_ids(0, ids, K, sampling(), SEEDS)
        assert [r.prompt_ids for r in out] == ids
        vocab = len(harness.tokenizers[0])
        for r in out:
            assert len(r.completion_ids) == K
            assert all(isinstance(t, int) and 0 <= t < vocab for c in r.completion_ids for t in c)

    def test_text_form_is_the_same_sampling(self, harness):
        tok = harness.tokenizers[0]
        texts = prompts(3)
        # The text form core samples through (a plugin backend gets it from the registry).
        text = with_text(harness.backend, harness.tokenizers)
        by_text = text.generate(0, texts, K, sampling(), SEEDS)
        by_ids = harness.backend.generate_ids(0, tokenize_prompts(tok, texts), K, sampling(), SEEDS)
        assert [s.completion_ids for s in by_text] == [r.completion_ids for r in by_ids]
        assert [s.prompt for s in by_text] == texts
        for s in by_text:
            assert s.texts == tok.batch_decode(s.completion_ids, skip_special_tokens=True)

    def test_rows_stop_at_eos_or_the_cap(self, harness):
        eos = eos_ids(harness, 0)
        out = harness.backend.generate_ids(0, prompt_ids(harness), K, sampling(), SEEDS)
        for row in (c for r in out for c in r.completion_ids):
            assert 1 <= len(row) <= MAX_NEW
            assert not eos.intersection(row[:-1]), row  # nothing after the first EOS
            assert row[-1] in eos or len(row) == MAX_NEW, row

    def test_n_samples_per_prompt_differ(self, harness):
        out = harness.backend.generate_ids(0, prompt_ids(harness), 8, sampling(), SEEDS)
        assert all(len(r.completion_ids) == 8 for r in out)
        assert any(len({tuple(c) for c in r.completion_ids}) > 1 for r in out)

    def test_seeds_reproduce_whatever_the_batch(self, harness):
        ids = prompt_ids(harness)
        first = harness.backend.generate_ids(0, ids, K, sampling(), SEEDS)
        again = harness.backend.generate_ids(0, ids, K, sampling(), SEEDS)
        alone = harness.backend.generate_ids(0, ids[1:2], K, sampling(), SEEDS[1:2])
        assert [r.completion_ids for r in first] == [r.completion_ids for r in again]
        assert alone[0].completion_ids == first[1].completion_ids
        other = harness.backend.generate_ids(0, ids, K, sampling(), [s + 100 for s in SEEDS])
        assert [r.completion_ids for r in other] != [r.completion_ids for r in first]

    def test_greedy_is_deterministic(self, harness):
        greedy = sampling(do_sample=False)
        ids = prompt_ids(harness)
        a = harness.backend.generate_ids(0, ids, 1, greedy)
        b = harness.backend.generate_ids(0, ids, 1, greedy)
        assert [r.completion_ids for r in a] == [r.completion_ids for r in b]

    def test_sampler_logprobs_match_the_trainers_score(self, harness):
        out = harness.backend.generate_ids(
            0, prompt_ids(harness), K, sampling(temperature=0.7), SEEDS
        )
        if harness.logprob_tolerance is None:
            assert all(r.logprobs is None for r in out)
            pytest.skip("this backend reports no sampler log-probs")
        rows = [(r.prompt_ids, c, lp) for r in out for c, lp in zip(r.completion_ids, r.logprobs)]
        for _, c, lp in rows:
            assert len(lp) == len(c)
            assert all(torch.isfinite(torch.tensor(x)) and x <= 1e-6 for x in lp)
        model = harness.models[0]
        pad = harness.tokenizers[0].pad_token_id
        scored = token_logprobs(
            model, [p for p, _, _ in rows], [c for _, c, _ in rows], pad_id=pad, temperature=0.7
        )
        diffs = []
        for j, (_, _c, lp) in enumerate(rows):
            ours = scored.values[j][scored.mask[j].bool()].float().cpu()
            diffs.append((ours - torch.tensor(lp)).abs())
        assert float(torch.cat(diffs).mean()) <= harness.logprob_tolerance

    def test_a_weight_update_shows_in_the_next_rollout(self, harness):
        ids = prompt_ids(harness)
        before = harness.backend.generate_ids(0, ids, K, sampling(), SEEDS)
        harness.update(0)
        after = harness.backend.generate_ids(0, ids, K, sampling(), SEEDS)
        assert [r.completion_ids for r in after] != [r.completion_ids for r in before]

    def test_updating_one_agent_leaves_the_other_alone(self, harness):
        ids = prompt_ids(harness, agent=1)
        before = harness.backend.generate_ids(1, ids, K, sampling(), SEEDS)
        harness.update(0)
        harness.backend.generate_ids(0, prompt_ids(harness), K, sampling(), SEEDS)
        after = harness.backend.generate_ids(1, ids, K, sampling(), SEEDS)
        assert [r.completion_ids for r in after] == [r.completion_ids for r in before]
