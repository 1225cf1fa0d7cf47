"""Atomic, resumable checkpoints of a whole training run."""
