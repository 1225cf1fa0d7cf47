"""Add a metrics sink: a class with ``write(metrics, step)`` and ``close()``, and a name.

This one appends every record to ``<run dir>/metrics.csv`` (one row per record, columns
``step,key,value``). In a package, register the factory under the entry-point group
``comlrl.sinks`` instead of calling ``register_sink``::

    [project.entry-points."comlrl.sinks"]
    csv = "my_package.sinks:csv_sink"

Run:  uv run --frozen python examples/extending/custom_sink.py
"""

import argparse
import csv
import os
import sys
from pathlib import Path

from comlrl.core.logging.sink import register_sink

sys.path.insert(0, str(Path(__file__).parent))


class CsvSink:
    """Long-format CSV of every numeric metric."""

    def __init__(self, run_dir):
        self.file = open(os.path.join(run_dir, "metrics.csv"), "a", newline="")
        self.writer = csv.writer(self.file)

    def write(self, metrics, step):
        for key, value in metrics.items():
            if isinstance(value, (int, float)):
                self.writer.writerow([step, key, value])
        self.file.flush()

    def close(self):
        self.file.close()


def csv_sink(run_dir, run_config, options):
    """The factory the logger calls: ``(run_dir, run_config, options) -> Sink``."""
    return CsvSink(run_dir)


register_sink("csv", csv_sink)


def main(argv=None):
    from _common import tiny_run

    from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

    parser = argparse.ArgumentParser(description="MAGRPO logging to a custom CSV sink.")
    parser.add_argument("--out", default="runs/custom_sink")
    args = parser.parse_args(argv)
    trainer = tiny_run(MAGRPOTrainer, MAGRPOConfig, args.out, report_to=["csv"])
    trainer.train()
    return trainer


if __name__ == "__main__":
    main()
