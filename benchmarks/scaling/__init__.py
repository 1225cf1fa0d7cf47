"""Scaling curves: how MAGRPO's cost grows with agents, samples, turns and tokens, ours
against the reference package (``python -m benchmarks.scaling``; docs/performance.md,
"Scaling")."""
