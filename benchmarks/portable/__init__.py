"""Benchmark pieces that import only the standard library, torch and transformers.

They run unchanged in our environment and in the reference package's venv, so both sides use
the very same prompts, reward, transition, timers and counters. ``reference_driver.py`` is the
reference side's entry point.
"""
