"""Every agent's rollout in one decoding call when the agents are adapters of one base.

With ``peft_config`` and one base, the agents are views of one shared peft model
(:class:`comlrl.core.models.adapters.SharedBase`). Decoding them one after another runs the base's
layers once per agent; a *mixed* call runs them once over every agent's rows, each row through
its own adapter (peft's per-row ``adapter_names``). ``python -m benchmarks mixed_adapters``
measured the mixed call 1.65x / 2.40x / 2.84x faster at N = 2 / 4 / 8 agents (docs/performance.md,
"N agents on one base"), so the ``hf`` backend decodes mixed whenever it can:

- every agent is an adapter of the same shared model, with its own adapter name;
- the agents agree on the pad and end-of-sequence ids;
- the request is unseeded and samples (greedy decoding of K > 1 copies is refused, as
  ``generate`` refuses it agent by agent). Item-seeded sampling (``item_seeded_sampling=True``)
  promises that a prompt's samples depend on its seed alone, so it keeps decoding agent by
  agent.

``rollout_backend_options: {mixed_adapters: false}`` turns it off. Rows are decoded by the shared
model's ``generate`` (peft does not take ``adapter_names`` in the compacting decoder's forward
calls); each prompt's K copies are separate rows, as ``num_return_sequences`` would make them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from comlrl.core.rollout.generation import SamplingParams, eos_ids_of, generate_rows, left_pad


def shared_adapters(models: Sequence[Any], tokenizers: Sequence[Any]):
    """The shared base behind ``models`` and each agent's adapter name, when every model is an
    adapter view of that one base with a name of its own and the tokenizers agree on pad and
    EOS ids; None otherwise."""
    from comlrl.core.models.adapters import AdapterAgent

    if len(models) < 2 or not all(isinstance(m, AdapterAgent) for m in models):
        return None
    shared = models[0].shared
    names = [m.adapter_name for m in models]
    if any(m.shared is not shared for m in models) or len(set(names)) != len(names):
        return None
    pads = {t.pad_token_id for t in tokenizers}
    eos = {frozenset(eos_ids_of(t, shared.model)) for t in tokenizers}
    if len(pads) != 1 or len(eos) != 1:
        return None
    return shared, names


def sample_mixed(
    shared,
    names: Sequence[str],
    tokenizer,
    prompt_ids_per_agent: Sequence[Sequence[Sequence[int]]],
    num_samples: int,
    params: SamplingParams,
    max_sequences_per_call: int | None = None,
) -> list[list[list[list[int]]]]:
    """``num_samples`` completions of every agent's prompts, each row through its agent's
    adapter, in as few ``generate`` calls as ``max_sequences_per_call`` allows (a prompt's
    copies stay in one call). Returns ``[agent][prompt][sample]`` token ids, each trimmed after
    its first EOS."""
    model = shared.model
    eos_ids = eos_ids_of(tokenizer, model)
    pad_id = tokenizer.pad_token_id
    jobs = [(i, j) for i, prompts in enumerate(prompt_ids_per_agent) for j in range(len(prompts))]
    per_call = len(jobs)
    if max_sequences_per_call:
        per_call = max(1, max_sequences_per_call // num_samples)
    gen_kwargs = params.generate_kwargs()
    out: list[list[Any]] = [[None] * len(prompts) for prompts in prompt_ids_per_agent]
    device = next(model.parameters()).device
    with shared.lock:
        was_training = model.training
        model.eval()  # peft takes adapter_names in eval mode only
        try:
            with torch.inference_mode():
                for start in range(0, len(jobs), per_call):
                    chunk = jobs[start : start + per_call]
                    rows = [
                        prompt_ids_per_agent[i][j] for i, j in chunk for _ in range(num_samples)
                    ]
                    ids, mask = left_pad(rows, pad_id)
                    new = generate_rows(
                        model,
                        ids.to(device),
                        mask.to(device),
                        1,  # each copy is a row of its own, so it names its adapter
                        gen_kwargs,
                        eos_ids,
                        pad_id,
                        adapter_names=[names[i] for i, _ in chunk for _ in range(num_samples)],
                    )
                    for c, (i, j) in enumerate(chunk):
                        out[i][j] = new[c * num_samples : (c + 1) * num_samples]
        finally:
            model.train(was_training)
    return out
