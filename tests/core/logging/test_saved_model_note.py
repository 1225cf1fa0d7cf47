"""Where the final models went is a note for the sinks with a run of their own (as 1.4.3 logged
``final_model_saved`` to W&B), told by core's reporting for every family; the metrics file
keeps numbers only."""

from __future__ import annotations

import json

from comlrl.core.logging import sink as sinks
from tests.ac.helpers import make_iac
from tests.reinforce.helpers import make_trainer


class _RunSink:
    """A sink with a run of its own (it has ``finish``), like W&B's."""

    def __init__(self):
        self.records: list[tuple[dict, int]] = []

    def write(self, metrics, step):
        self.records.append((dict(metrics), step))

    def close(self):
        pass

    def finish(self):
        pass


class _PlainSink(_RunSink):
    finish = None


def _register(monkeypatch, name, sink):
    monkeypatch.setitem(sinks._FACTORIES, name, lambda run_dir, run_config, options: sink)


def test_every_family_notes_the_saved_models_to_run_sinks_only(tmp_path, monkeypatch):
    for make, algo in ((make_trainer, "magrpo"), (make_iac, "iac")):
        run_sink, plain = _RunSink(), _PlainSink()
        _register(monkeypatch, f"run_{algo}", run_sink)
        _register(monkeypatch, f"plain_{algo}", plain)
        out = tmp_path / algo
        trainer = make(out, report_to=[f"run_{algo}", f"plain_{algo}"], num_train_epochs=1)
        trainer.train()
        trainer.save_model(str(out / "models"))
        notes = [m for m, _ in run_sink.records if "final_model_saved" in m]
        assert notes == [{"final_model_saved": str(out / "models")}], algo
        assert not any("final_model_saved" in m for m, _ in plain.records)
        lines = (out / "run" / "metrics.jsonl").read_text().splitlines()
        assert lines and not any("final_model_saved" in json.loads(line) for line in lines)
