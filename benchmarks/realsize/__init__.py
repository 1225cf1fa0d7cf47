"""Memory and step time at real shapes: ``python -m benchmarks realsize``.

Two kinds of cell, each measured in a fresh process on random-init agents (nothing is
downloaded):

- the trainer matrix (:mod:`benchmarks.realsize.matrix`): one training step of MAGRPO, IAC and
  MADPO with N = 1, 2, 4 agents of the Qwen2.5-0.5B shape, for full fp32, ``bf16: true``, one
  base with an adapter per agent, parameter sharing and gradient checkpointing; the reference
  1.4.3 on the same shapes; TRL's GRPOTrainer as the one-agent peer; and memory cells at the 1.5B shape. Peak RSS, and the step split
  into decode, scoring and backward+step. The run writes the table and
  ``docs/images/realsize.png`` into docs/performance.md, and the per-option table of MAGRPO
  into docs/real_models.md.
- the scoring cells (:mod:`benchmarks.realsize.scoring`): the loss forward+backward of a
  4 x 8 x 128-token update at vocabulary 151,936, its peak above the model-and-optimizer floor.

    uv run --frozen python -m benchmarks realsize                     # the matrix (about 40 min)
    uv run --frozen python -m benchmarks realsize --cells qwen05-magrpo-n4-adapters
    uv run --frozen python -m benchmarks realsize --missing           # cells not measured yet
    uv run --frozen python -m benchmarks realsize --scoring [CELL ...]
    uv run --frozen python -m benchmarks realsize --table             # the saved results
    uv run --frozen python -m benchmarks realsize --docs              # rewrite the docs from them

Results are merged into ``benchmarks/results/realsize.json``; cells not run are shown as not
measured, never estimated.
"""

from __future__ import annotations

import argparse
import json

from benchmarks.realsize import matrix, report, scoring

RESULTS = scoring.RESULTS


def _saved() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def _save(results: dict) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


def _run_matrix(names, args, results: dict) -> None:
    from benchmarks.refvenv import reference_python, trl_python

    chosen = [c for c in matrix.cells() if not names or c.name in names]
    if args.missing:
        chosen = [c for c in chosen if c.name not in results]
    sides = {c.side for c in chosen}
    pythons = {}
    if "reference" in sides:
        pythons["reference"] = reference_python()
    if "trl" in sides:
        pythons["trl"] = trl_python()
    for i, cell in enumerate(chosen, 1):
        print(f"[realsize {i}/{len(chosen)}] {cell.name} ...", flush=True)
        record = matrix.run_cell(cell, args.threads, pythons, args.timeout)
        record["command"] = "python -m benchmarks realsize --cells " + cell.name
        results[cell.name] = record
        _save(results)  # a killed run keeps every finished cell
        print(f"    {record['status']}: {record.get('peak_rss_gb', '')}", flush=True)


def main(argv=None) -> int:
    """Run the chosen cells, save them, and print (and write into the docs) the tables."""
    p = argparse.ArgumentParser(prog="python -m benchmarks realsize", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--cells", nargs="+", default=None, help="matrix cells to run (default: all)")
    p.add_argument("--missing", action="store_true", help="only cells without a saved result")
    p.add_argument("--scoring", nargs="*", default=None, choices=[*scoring.CELLS, "qwen05-scoring"],
                   help="run scoring cells instead (none named: the tiny-body ones)")  # fmt: skip
    p.add_argument("--table", action="store_true", help="print the saved results only")
    p.add_argument("--docs", action="store_true",
                   help="write the PNG and the docs blocks from the saved results, run nothing")  # fmt: skip
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per matrix cell")
    p.add_argument("--cell-child", choices=list(scoring.CELLS), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cell_child:
        import torch

        torch.set_num_threads(args.threads)
        print(json.dumps(scoring.run_cell(args.cell_child)))
        return 0
    results = _saved()
    known = {c.name for c in matrix.cells()}
    unknown = sorted(set(args.cells or ()) - known)
    if unknown:
        p.error(f"--cells: unknown {unknown}; valid: {sorted(known)}")
    measure = not (args.docs or args.table)
    if measure and args.scoring is not None:
        names = args.scoring or list(scoring.DEFAULT_CELLS)
        names = [
            n for c in names for n in (scoring.QWEN05_CELLS if c == "qwen05-scoring" else (c,))
        ]
        scoring.run(names, args.threads, results)
        _save(results)
    elif measure:
        _run_matrix(args.cells, args, results)
    if args.docs or (measure and args.scoring is None):
        report.plot(results)
        report.write_doc(results, "python -m benchmarks realsize")
    print(scoring.table(results), end="")
    print(report.table(results), end="")
    return 0
