"""Watching a MAGRPO run: sampled completions in completions.jsonl (resumable, W&B table),
one eval sample on the console, and a final evaluation after the last update."""

import importlib.machinery
import json
import sys
import types

import pytest

from comlrl.core.logging.completions import COMPLETIONS_FILE
from comlrl.core.logging.jsonl import read_metrics
from comlrl.reinforce import MAGRPOConfig

from .helpers import PROMPTS, length_reward, make_trainer


def _rows(run_dir):
    path = run_dir / COMPLETIONS_FILE
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_completions_hold_the_sampled_texts_reward_and_advantage(tmp_path):
    trainer = make_trainer(tmp_path, log_completions=3)
    texts = []
    original = trainer.rollout_backend.generate

    def spying(agent, prompts, n, params, seeds=None):
        out = original(agent, prompts, n, params, seeds)
        texts.extend((agent, t) for s in out for t in s.texts)
        return out

    trainer.rollout_backend.generate = spying
    trainer.train()
    rows = _rows(tmp_path / "run")
    assert len(rows) == 3  # one batch of 2 items x 2 joint actions, 3 rows asked for
    metrics = read_metrics(tmp_path / "run" / "metrics.jsonl")
    for row in rows:
        assert metrics[row["record"]]["step"] == row["step"]
        assert "agent_0/loss" in metrics[row["record"]]
        assert row["prompts"][0] in [p["prompt"] for p in PROMPTS]
        for agent, text in enumerate(row["completions"]):
            assert (agent, text) in texts
        a, b = row["completions"]
        assert row["reward"] == pytest.approx(length_reward([a], [b])[0])
        assert len(row["advantages"]) == 2 and all(isinstance(v, float) for v in row["advantages"])


def test_completions_are_off_by_default(tmp_path):
    trainer = make_trainer(tmp_path)
    trainer.train()
    assert not (tmp_path / "run" / COMPLETIONS_FILE).exists()


@pytest.mark.parametrize("bad", [-1, 1.5, "4"])
def test_bad_log_completions_is_named(bad):
    with pytest.raises(ValueError, match="log_completions"):
        MAGRPOConfig(log_completions=bad)


def test_true_means_four_rows():
    assert MAGRPOConfig(log_completions=True).log_completions == 4
    assert MAGRPOConfig(log_completions=False).log_completions == 0


class Crash(RuntimeError):
    pass


def _four_item_run(tmp_path, reward=length_reward):
    trainer = make_trainer(tmp_path, reward=reward, log_completions=2, num_train_epochs=2)
    trainer.train_dataset = PROMPTS
    return trainer


def test_resumed_run_continues_the_file_without_duplicates(tmp_path):
    reference = _four_item_run(tmp_path / "a")
    reference.train()
    expected = _rows(tmp_path / "a" / "run")
    assert len(expected) == 8  # 4 batches (2 per epoch) x 2 rows

    calls = {"n": 0}

    def crashing(a, b):
        calls["n"] += 1
        if calls["n"] == 4:  # batch 4; batch 3's rows were written after the epoch-1 checkpoint
            raise Crash("lost")
        return length_reward(a, b)

    ckpt = str(tmp_path / "b" / "checkpoints")
    first = _four_item_run(tmp_path / "b", reward=crashing)
    with pytest.raises(Crash):
        first.train(checkpoint_dir=ckpt)
    assert len(_rows(tmp_path / "b" / "run")) == 6
    second = _four_item_run(tmp_path / "b")
    second.train(resume_from_checkpoint="latest", checkpoint_dir=ckpt)
    assert _rows(tmp_path / "b" / "run") == expected


def test_fresh_run_sets_an_earlier_file_aside(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / COMPLETIONS_FILE).write_text('{"step": 9, "record": 0}\n')
    trainer = make_trainer(tmp_path, log_completions=1)
    trainer.train()
    assert all(r["step"] != 9 for r in _rows(tmp_path / "run"))
    assert (tmp_path / "run" / "completions.old-1.jsonl").exists()


class _FakeRun:
    id = "fake-run"

    def __init__(self):
        self.logged = []

    def log(self, data, step=None):
        self.logged.append((dict(data), step))

    def finish(self):
        pass


def test_wandb_gets_a_completions_table(tmp_path, monkeypatch):
    run = _FakeRun()

    class Table:
        def __init__(self, columns, data):
            self.columns, self.data = columns, data

    trainer = make_trainer(tmp_path, log_completions=2)  # models load before W&B is faked
    fake = types.ModuleType("wandb")
    fake.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
    fake.init = lambda **kwargs: run
    fake.Table = Table
    monkeypatch.setitem(sys.modules, "wandb", fake)
    trainer.args.report_to = ["wandb"]
    trainer.wandb_config = {"project": "p"}
    trainer.train()
    tables = [(d["completions"], step) for d, step in run.logged if "completions" in d]
    assert len(tables) == 1
    table, step = tables[0]
    assert {"prompts_0", "completions_0", "completions_1", "reward", "advantages_1"} <= set(
        table.columns
    )
    rows = _rows(tmp_path / "run")
    col = table.columns.index("completions_1")
    assert [r[col] for r in table.data] == [r["completions"][1] for r in rows]
    assert step == rows[0]["step"]


def test_final_evaluation_comes_after_the_last_update(tmp_path, capsys):
    trainer = make_trainer(tmp_path, eval_interval=2, eval_num_samples=1, show_eval_sample=True)
    trainer.eval_dataset = PROMPTS[:1]
    trainer.train()
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    last_train = max(i for i, r in enumerate(records) if "agent_0/loss" in r)
    assert "eval/turn_1/reward_mean" in records[0]  # the cadence: before the first batch
    assert last_train == len(records) - 2
    final = records[-1]
    assert "eval/turn_1/reward_mean" in final and final["step"] == records[last_train]["step"]
    out = capsys.readouterr().out
    assert out.count("eval sample at env step") == 2 and "agent 1 wrote" in out


def test_final_evaluation_can_be_switched_off(tmp_path):
    trainer = make_trainer(tmp_path, eval_interval=0, eval_num_samples=1, eval_at_end=False)
    trainer.eval_dataset = PROMPTS[:1]
    trainer.train()
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert not any("eval/turn_1/reward_mean" in r for r in records)
