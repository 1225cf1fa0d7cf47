"""Metric sinks: report_to picks them, TensorBoard's own reader loads what ours writes, and a
sink registered by name receives every record."""

import math

import pytest

from comlrl.core.logging import MetricLogger, check_report_to
from comlrl.core.logging import sink as sink_module


def _scalars(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tensorboard_event_files_load_with_tensorboards_reader(tmp_path):
    logger = MetricLogger(tmp_path, report_to=["jsonl", "tensorboard"])
    logger.log({"turn_1/reward_mean": 0.25, "agent_0/loss": -1.5, "note": "text"}, 3)
    logger.log({"turn_1/reward_mean": 0.75, "agent_0/loss": float("nan")}, 7)
    logger.close()
    scalars = _scalars(tmp_path / "tensorboard")
    assert scalars["turn_1/reward_mean"] == [(3, 0.25), (7, 0.75)]
    # non-numeric and non-finite values are left to the other sinks
    assert scalars["agent_0/loss"] == [(3, -1.5)]
    assert "note" not in scalars
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 2


def test_a_training_run_reports_to_tensorboard(tmp_path):
    from tests.reinforce.helpers import make_trainer

    trainer = make_trainer(tmp_path, report_to=["tensorboard"])
    trainer.train()
    scalars = _scalars(tmp_path / "run" / "tensorboard")
    assert scalars["turn_1/reward_mean"] and scalars["agent_1/loss"]
    assert all(math.isfinite(v) for _, v in scalars["turn_1/reward_mean"])


class _ListSink:
    records: list = []

    def write(self, metrics, step):
        self.records.append((step, dict(metrics)))

    def close(self):
        self.records.append("closed")


def test_a_registered_sink_receives_every_record(tmp_path, monkeypatch):
    monkeypatch.setitem(sink_module._FACTORIES, "memory", lambda run_dir, cfg, opts: _ListSink())
    _ListSink.records = []
    logger = MetricLogger(tmp_path, report_to=["memory"])
    logger.log({"a": 1.0}, 1)
    logger.log({"a": 2.0}, 0)  # a step never goes backwards
    logger.close()
    assert _ListSink.records == [(1, {"a": 1.0}), (1, {"a": 2.0}), "closed"]


def test_report_to_names_the_valid_sinks():
    assert check_report_to("tensorboard") == ["tensorboard"]
    assert check_report_to(None) is None
    assert check_report_to("auto") == "auto" and check_report_to("AUTO") == "auto"
    assert check_report_to("none") == [] and check_report_to([]) == []
    with pytest.raises(ValueError, match="'auto' and 'none' stand alone"):
        check_report_to(["auto", "tensorboard"])
    with pytest.raises(ValueError, match="report_to: unknown sink 'tensorbord'.*tensorboard"):
        check_report_to(["jsonl", "tensorbord"])
    with pytest.raises(ValueError, match="report_to must be 'auto', 'none', a sink name"):
        check_report_to(3)
