"""Mixed-adapter batches against one forward per agent, for N agents on one base.

With ``peft_config`` and one base, every agent is an adapter of one shared model
(:class:`comlrl.core.models.adapters.SharedBase`). Its inference-time work (sampling, and the
no-grad scoring of rollout and reference log-probs) can run either as one call per agent, each with
its adapter active, or as one *mixed* call over every agent's rows, each row through its own adapter
(peft's ``adapter_names``: the base layers run once over all rows, each adapter over its own rows).
Training forwards cannot be mixed (peft refuses ``adapter_names`` in training mode). This benchmark
times both ways in one process, on one model, and checks that they give the same log-probs:

    uv run --frozen python -m benchmarks mixed_adapters [--agents 2 4] [--model DIR]

The default model is the 35M-parameter Qwen2 shape of ``python -m benchmarks adapters``;
``--model`` takes any saved causal LM directory (the realsize cache's
``~/.cache/comlrl/realsize/qwen05``, say). Reported: seconds per way (median of ``--repeats``)
and their ratio, for decoding ``--new-tokens`` tokens and for scoring the decoded rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from benchmarks.adapters import _model_dir

LORA = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
        "lora_dropout": 0.0, "peft_type": "LORA", "task_type": "CAUSAL_LM"}  # fmt: skip


def _shared(model_dir: str, n: int):
    import torch
    from transformers import AutoModelForCausalLM

    from comlrl.core.models.adapters import SharedBase

    torch.manual_seed(0)
    shared = SharedBase(AutoModelForCausalLM.from_pretrained(model_dir), LORA,
                        [f"agent_{i}" for i in range(n)])  # fmt: skip
    with torch.no_grad():  # non-zero adapters, so a row through the wrong one would show
        for name, p in shared.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)
    shared.model.eval()
    return shared


def _median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: first-call dispatch and allocator growth stay outside the timing
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _token_logprobs(logits, ids, prompt_len: int):
    import torch

    logp = torch.log_softmax(logits[:, prompt_len - 1 : -1].float(), dim=-1)
    return logp.gather(-1, ids[:, prompt_len:, None]).squeeze(-1)


def measure(model_dir: str, n: int, rows: int, prompt_len: int, new_tokens: int,
            repeats: int) -> dict:  # fmt: skip
    """Both ways for ``n`` agents with ``rows`` rows each; seconds and the largest log-prob
    difference between them."""
    import torch

    shared = _shared(model_dir, n)
    names = shared.names
    vocab = shared.model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(3, vocab, (n, rows, prompt_len), generator=gen)
    mixed_names = [name for name in names for _ in range(rows)]
    settings = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                    pad_token_id=0, attention_mask=torch.ones(rows, prompt_len, dtype=torch.long))  # fmt: skip
    mixed_settings = settings | {
        "attention_mask": torch.ones(n * rows, prompt_len, dtype=torch.long)
    }

    def decode_per_agent():
        out = []
        for i, name in enumerate(names):
            with shared.active(name), torch.no_grad():
                out.append(shared.model.generate(input_ids=prompts[i], **settings))
        return out

    def decode_mixed():
        with torch.no_grad():
            return shared.model.generate(input_ids=prompts.reshape(n * rows, -1),
                                         adapter_names=mixed_names, **mixed_settings)  # fmt: skip

    sequences = torch.cat(decode_per_agent())

    def score_per_agent():
        parts = []
        for i, name in enumerate(names):
            ids = sequences[i * rows : (i + 1) * rows]
            with shared.active(name), torch.no_grad():
                parts.append(_token_logprobs(shared.model(input_ids=ids).logits, ids, prompt_len))
        return torch.cat(parts)

    def score_mixed():
        with torch.no_grad():
            logits = shared.model(input_ids=sequences, adapter_names=mixed_names).logits
        return _token_logprobs(logits, sequences, prompt_len)

    per_agent = score_per_agent()
    agree = float((per_agent - score_mixed()).abs().max())
    with shared.active(names[-1]), torch.no_grad():  # agent 0's rows through another adapter
        ids = sequences[:rows]
        other = _token_logprobs(shared.model(input_ids=ids).logits, ids, prompt_len)
    adapters_differ = float((other - per_agent[:rows]).abs().max())
    same_tokens = bool(torch.equal(sequences, decode_mixed()))
    out = {"agents": n, "rows_per_agent": rows, "prompt_tokens": prompt_len,
           "new_tokens": new_tokens, "max_logprob_difference": agree,
           "other_adapter_difference": adapters_differ,
           "greedy_decodes_equal": same_tokens}  # fmt: skip
    for phase, (per_agent, mixed) in {"decode": (decode_per_agent, decode_mixed),
                                      "score": (score_per_agent, score_mixed)}.items():  # fmt: skip
        a, b = _median_seconds(per_agent, repeats), _median_seconds(mixed, repeats)
        out[f"{phase}_per_agent_s"] = round(a, 4)
        out[f"{phase}_mixed_s"] = round(b, 4)
        out[f"{phase}_speedup"] = round(a / b, 2)
    return out


def main(argv=None) -> int:
    """Print one JSON line per agent count."""
    p = argparse.ArgumentParser(prog="python -m benchmarks mixed_adapters", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--agents", nargs="+", type=int, default=[2, 4])
    p.add_argument("--rows", type=int, default=4, help="rows per agent (K completions)")
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model", default=None, help="a saved causal LM directory")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as root:
        model_dir = args.model or _model_dir(root)
        for n in args.agents:
            print(json.dumps(measure(model_dir, n, args.rows, args.prompt_tokens,
                                     args.new_tokens, args.repeats)), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
