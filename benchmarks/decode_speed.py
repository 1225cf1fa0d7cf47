"""Decoding speed of the rollout decoders on the test models: the compacting decoder through
``model.forward`` and with the direct decode step, against the static-cache decoder, uncompiled
and compiled (``torch.compile``).

    nice -n 19 uv run --frozen python -m benchmarks.decode_speed --sizes tiny small

One process, one torch thread by default. Per model size it decodes ``--prompts`` prompts x K
rows, every row to ``--new-tokens`` (EOS held back, as with an untrained model; ``--stop-early``
lets rows stop at EOS as the pre-trained test models do, so finished rows leave the batch), once
to warm up (the compiled decoder compiles here) and then ``--repeats`` timed times, checks that
every decoder returned the same rows as the compacting decoder for the same seeds, and prints the
generated tokens per second of process CPU time and of wall time as JSON lines and a table.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from comlrl.core.rollout.decoding import decode_compacting
from comlrl.core.rollout.direct_step import verified
from comlrl.core.rollout.generation import SamplingParams, left_pad, tokenize_prompts
from comlrl.core.rollout.static_decode import decode_static
from comlrl.core.testing import prompts, tiny_model_dir

DECODERS = {
    "compacting": lambda *a: decode_compacting(*a),
    "direct": lambda *a: decode_compacting(*a, direct=True),
    "static": lambda *a: decode_static(*a, compile_backend=None),
    "static+compile": lambda *a: decode_static(*a, compile_backend="inductor"),
}


def measure(size: str, args) -> list[dict]:
    """Tokens/s of every decoder on one model size."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_model_dir(size=size)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    if not verified(model):
        raise SystemExit(f"the direct step does not serve the {size} test model")
    tok = AutoTokenizer.from_pretrained(path)
    ids, mask = left_pad(tokenize_prompts(tok, prompts(args.prompts)), tok.pad_token_id)
    floor = {} if args.stop_early else {"min_new_tokens": args.new_tokens}
    kwargs = SamplingParams(max_new_tokens=args.new_tokens, extra=floor).generate_kwargs()
    out, reference = [], None
    for name in args.decoders:
        decode = DECODERS[name]

        def run(seed, decode=decode):
            gen = torch.Generator().manual_seed(seed)
            with torch.inference_mode():
                return decode(
                    model, ids, mask, kwargs, {tok.eos_token_id}, tok.pad_token_id, args.k, gen
                )

        start = time.perf_counter()
        run(0)
        warm = time.perf_counter() - start
        cpu, wall, tokens, rows = 0.0, 0.0, 0, []
        for rep in range(args.repeats):
            c0, w0 = time.process_time(), time.perf_counter()
            rows.append(run(rep + 1))
            cpu += time.process_time() - c0
            wall += time.perf_counter() - w0
            tokens += sum(len(r) for r in rows[-1])
        reference = rows if reference is None else reference
        rec = dict(
            size=size,
            decoder=name,
            rows=args.prompts * args.k,
            tokens=tokens,
            tokens_per_cpu_s=tokens / cpu,
            tokens_per_wall_s=tokens / wall,
            warmup_wall_s=warm,
            same_rows_as_compacting=rows == reference,
        )
        print(json.dumps(rec), flush=True)
        out.append(rec)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=["tiny", "small"])
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--stop-early", action="store_true", help="let rows stop at EOS")
    p.add_argument(
        "--decoders",
        nargs="+",
        choices=list(DECODERS),
        default=list(DECODERS),
        help="which decoders (the first one is the reference for `same rows`)",
    )
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    records = [r for size in args.sizes for r in measure(size, args)]
    print("\n| model | decoder | tokens/s (CPU time) | tokens/s (wall) | warm-up (s) | same rows |")
    print("|---|---|---|---|---|---|")
    for r in records:
        print(
            f"| {r['size']} | {r['decoder']} | {r['tokens_per_cpu_s']:.0f} | "
            f"{r['tokens_per_wall_s']:.0f} | {r['warmup_wall_s']:.1f} | "
            f"{r['same_rows_as_compacting']} |"
        )


if __name__ == "__main__":
    main()
