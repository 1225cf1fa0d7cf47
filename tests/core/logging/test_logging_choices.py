"""Logging as a 1.4.3 and a TRL user expect it: ``report_to="auto"`` (the default) logs to W&B
when a ``wandb_config`` is given, an explicit ``report_to`` picks the sinks, the W&B run is named
after the run directory, TensorBoard gets the completions table as text, and ``comlrl train``
prints a short table of eval completions after each evaluation."""

from __future__ import annotations

import importlib.machinery
import sys
import types

import pytest

from comlrl.core.cli import main
from comlrl.core.logging import MetricLogger
from comlrl.core.logging.console import CELL_WIDTH, completions_table
from tests.reinforce.helpers import TINY_CLI_RUN


class _FakeWandb:
    """A ``wandb`` module that records ``init`` calls and logged data."""

    def __init__(self):
        self.inits: list[dict] = []
        self.logged: list = []
        module = types.ModuleType("wandb")
        module.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
        module.init = self._init
        module.Table = lambda columns, data: {"columns": columns, "data": data}
        self.module = module

    def _init(self, **kwargs):
        self.inits.append(kwargs)
        outer = self

        class Run:
            id = "fake"

            def log(self, data, step=None):
                outer.logged.append((data, step))

            def finish(self):
                pass

        return Run()


@pytest.fixture
def fake_wandb(monkeypatch):
    fake = _FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake.module)
    return fake


@pytest.mark.parametrize(
    "report_to, wandb_on",
    [
        ("auto", True),  # a wandb_config turns W&B on, as in 1.4.3
        (None, False),
        ("none", False),
        ([], False),
        (["tensorboard"], False),
        (["wandb"], True),
        (["jsonl", "wandb"], True),
    ],
)
def test_report_to_chooses_the_sinks_given_a_wandb_config(
    tmp_path, fake_wandb, report_to, wandb_on
):
    logger = MetricLogger(
        tmp_path / "run-a", wandb_config={"project": "p"}, report_to=report_to, default_name="n"
    )
    logger.start()
    logger.log({"turn_1/reward_mean": 0.5}, 1)
    logger.close()
    assert bool(fake_wandb.inits) is wandb_on
    assert bool(fake_wandb.logged) is wandb_on


def test_auto_without_a_wandb_config_opens_no_wandb_run(tmp_path, fake_wandb):
    logger = MetricLogger(tmp_path / "run-b", report_to="auto", default_name="n")
    assert logger.destinations() == [str(tmp_path / "run-b" / "metrics.jsonl")]
    logger.start()
    logger.log({"turn_1/reward_mean": 0.5}, 1)
    logger.close()
    assert fake_wandb.inits == [] and fake_wandb.logged == []
    with_wandb = MetricLogger(tmp_path / "run-c", wandb_config={"project": "p"}, default_name="c")
    assert with_wandb.destinations()[1].startswith("W&B (project 'p', run 'c'")
    with_wandb.close()


def test_wandb_run_is_named_after_the_run_directory(tmp_path, fake_wandb):
    from tests.reinforce.helpers import make_trainer

    trainer = make_trainer(
        tmp_path, output_dir=str(tmp_path / "my-run-7"), report_to=["wandb"], eval_interval=0
    )
    trainer.wandb_config = {"project": "p"}
    trainer.train()
    trainer.reporting.logger.close()
    assert [init["name"] for init in fake_wandb.inits] == ["my-run-7"]
    # a name in the W&B section still wins
    logger = MetricLogger(
        tmp_path / "other", wandb_config={"name": "chosen"}, report_to=["wandb"], default_name="x"
    )
    logger.start()
    logger.close()
    assert fake_wandb.inits[-1]["name"] == "chosen"


def test_tensorboard_gets_the_completions_table_as_text(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = MetricLogger(tmp_path, report_to=["tensorboard"])
    logger.log({"turn_1/reward_mean": 0.5}, 4)
    rows = [
        {"turn": 1, "prompts": ["p0", "p1"], "completions": ["a | b", "line1\nline2"], "reward": 1}
    ]
    logger.log_completions(rows, 4)
    logger.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    # torch's add_text files a text summary under "<tag>/text_summary"
    (event,) = acc.Tensors("completions/text_summary")
    text = event.tensor_proto.string_val[0].decode()
    assert event.step == 4
    assert "| turn | prompts_0 | prompts_1 | completions_0 | completions_1 | reward |" in text
    assert "a \\| b" in text and "line1<br>line2" in text  # the row stays one table row


def test_completions_table_is_one_line_per_item_and_turn():
    long = "word " * 40
    episodes = [
        [{"turn": 1, "reward": 0.25, "completions": ["short", "two\nlines"]}],
        [
            {"turn": 1, "reward": 1.0, "completions": [long, "x"]},
            {"turn": 2, "reward": 0.5, "completions": ["y", "z"]},
        ],
    ]
    lines = completions_table(episodes, 12).splitlines()
    assert lines[0] == "eval completions at env step 12:"
    assert lines[1].split() == ["item", "turn", "reward", "agent", "0", "agent", "1"]
    body = lines[3:]
    assert len(body) == 3
    assert body[0].split()[:4] == ["0", "1", "0.250", "short"] and "two lines" in body[0]
    assert body[2].split()[:3] == ["1", "2", "0.500"]
    cell = body[1].split("  ")[3:4] or [""]
    assert "..." in body[1] and max(len(c) for c in cell) <= CELL_WIDTH


def test_comlrl_train_prints_eval_completions(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    common = [
        *TINY_CLI_RUN,
        "magrpo.eval_interval=0",
        "magrpo.eval_at_end=true",  # only the final evaluation
        "dataset.eval_limit=2",
    ]
    assert main(["train", "--override", *common, "output.run_name=shown"]) == 0
    out = capsys.readouterr().out
    assert out.count("eval completions at env step") == 1
    table = out[out.index("eval completions at env step") :].splitlines()
    assert table[1].split()[:3] == ["item", "turn", "reward"]
    assert [line.split()[0] for line in table[3:5]] == ["0", "1"]  # both eval items
    assert (
        main(
            ["train", "--override", *common, "output.run_name=quiet"]
            + ["--set", "output.console_completions=0"]
        )
        == 0
    )
    assert "eval completions" not in capsys.readouterr().out
