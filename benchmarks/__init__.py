"""Throughput and memory benchmarks of the CoMLRL trainers (see benchmarks/README.md)."""
