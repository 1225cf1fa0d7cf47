"""The learning benchmark: every algorithm and menu option, trained and scored afterwards.

``python -m benchmarks.learning`` trains each catalogued run (see ``--list``) on the length-ratio
demo set-up and on a small code task, two seeds each, in parallel worker processes, and appends
one JSON line per finished run to ``benchmarks/results/learning.jsonl``. ``table`` renders the
results file as the markdown table of ``docs/learning.md``.
"""
