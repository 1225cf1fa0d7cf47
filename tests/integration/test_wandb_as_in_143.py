"""A CoMLRL 1.4.3 script that passes a ``wandb_config`` logs to W&B as it did on 1.4.3.

W&B runs for real here, in ``disabled`` mode, with ``wandb.init`` wrapped so that every
``run.log`` call is recorded. The key names are 1.4.3's: ``turn_{t}/reward_mean`` and
``turn_{t}/expected_return`` while training, the same under ``eval/`` when evaluating, and
``eval/<key>`` for every key of the script's ``eval_aggregator``.
"""

from __future__ import annotations

import sys

import pytest

from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.testing import tiny_pair
from comlrl.trainers.actor_critic import IACConfig, IACTrainer
from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
from tests.reinforce.helpers import TINY_CLI_RUN

ITEMS = [{"prompt": "Write a story about a cat."}, {"prompt": "Write a story about the sea."}]
FAST = dict(
    num_train_epochs=1,
    max_new_tokens=4,
    temperature=1.0,
    top_p=1.0,
    top_k=None,
    logging_steps=1,
    num_turns=1,
    seed=0,
)
TRAIN_KEYS_143 = {"turn_1/reward_mean", "turn_1/expected_return"}
EVAL_KEYS_143 = {"eval/turn_1/reward_mean", "eval/turn_1/expected_return", "eval/mean_length"}


def reward(a, b):
    return [float(len(y) - len(x)) / 10.0 for x, y in zip(a, b)]


class EvalHooks:
    """A 1.4.3-style eval logger and aggregator that count their calls."""

    def __init__(self):
        self.logger_calls = 0
        self.aggregator_calls = 0

    def logger(self, *, agent_completions_turns, **_):
        self.logger_calls += 1
        return [{"length": float(len(turns[0]))} for turns in agent_completions_turns[0]]

    def aggregator(self, detailed, num_turns=1):
        self.aggregator_calls += 1
        return {"mean_length": sum(d["length"] for d in detailed) / max(len(detailed), 1)}


@pytest.fixture
def wandb_calls(monkeypatch):
    """The real ``wandb`` in disabled mode, its ``init`` and ``run.log`` calls recorded."""
    import wandb

    monkeypatch.setenv("WANDB_MODE", "disabled")
    calls: dict[str, list] = {"init": [], "log": []}
    real_init = wandb.init

    def init(**kwargs):
        calls["init"].append(kwargs)
        run = real_init(**kwargs)
        real_log = run.log

        def log(data, step=None, **more):
            calls["log"].append((dict(data), step))
            return real_log(data, step=step, **more)

        run.log = log
        return run

    monkeypatch.setattr(wandb, "init", init)
    yield calls
    # W&B keeps its settings (disabled mode included) in a process-wide singleton: drop it, so
    # that a later test of this worker can open an offline run.
    wandb.teardown()


def _logged_keys(calls) -> set[str]:
    return {key for data, _ in calls["log"] for key in data}


def _magrpo(tmp_path, hooks, wandb_config=None, **cfg):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    return MAGRPOTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=ITEMS,
        eval_dataset=ITEMS,
        reward_func=reward,
        wandb_config=wandb_config,
        eval_logger=hooks.logger,
        eval_aggregator=hooks.aggregator,
        args=MAGRPOConfig(
            **FAST,
            num_generations=2,
            rollout_buffer_size=2,
            eval_num_samples=2,
            output_dir=str(tmp_path / "run"),
            **cfg,
        ),
    )


def test_a_143_script_with_wandb_config_logs_its_keys_to_wandb(tmp_path, wandb_calls, capsys):
    hooks = EvalHooks()
    wandb_config = {"project": "comlrl-test", "name": "from-143", "dir": str(tmp_path / "wb")}
    trainer = _magrpo(tmp_path, hooks, wandb_config, eval_interval=1)
    assert trainer.args.report_to == "auto"  # nothing set: the default
    trainer.train()
    trainer.reporting.logger.close()
    assert [init["name"] for init in wandb_calls["init"]] == ["from-143"]
    assert wandb_calls["init"][0]["project"] == "comlrl-test"
    keys = _logged_keys(wandb_calls)
    assert TRAIN_KEYS_143 | EVAL_KEYS_143 <= keys
    # Every record of metrics.jsonl went to W&B too, at the same step.
    jsonl = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert len(wandb_calls["log"]) == len(jsonl) > 0
    for (data, _step), record in zip(wandb_calls["log"], jsonl):
        assert set(data) <= set(record)
    # The run's first line says where the metrics go.
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("MAGRPO: metrics go to ")
    assert "metrics.jsonl" in first and "W&B (project 'comlrl-test', run 'from-143'" in first


def test_actor_critic_script_with_wandb_config_logs_its_keys(tmp_path, wandb_calls):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    trainer = IACTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=ITEMS,
        eval_dataset=ITEMS,
        reward_func=reward,
        wandb_config={"project": "comlrl-test"},
        args=IACConfig(
            **FAST,
            num_generations=1,
            use_separate_critic=False,
            eval_interval=1,
            eval_num_samples=2,
            output_dir=str(tmp_path / "run"),
        ),
    )
    trainer.train()
    trainer.reporting.logger.close()
    assert len(wandb_calls["init"]) == 1
    assert TRAIN_KEYS_143 | EVAL_KEYS_143 - {"eval/mean_length"} <= _logged_keys(wandb_calls)


@pytest.mark.parametrize("report_to", ["none", [], None, ["tensorboard"]])
def test_an_explicit_report_to_wins_over_wandb_config(tmp_path, wandb_calls, report_to):
    hooks = EvalHooks()
    trainer = _magrpo(tmp_path, hooks, {"project": "p"}, eval_interval=1, report_to=report_to)
    trainer.train()
    trainer.reporting.logger.close()
    assert wandb_calls == {"init": [], "log": []}
    assert trainer.reporting.logger.wandb is None
    assert read_metrics(tmp_path / "run" / "metrics.jsonl")  # the local log is still written


def test_report_to_wandb_without_wandb_config_opens_a_run(tmp_path, wandb_calls):
    trainer = _magrpo(tmp_path, EvalHooks(), None, eval_interval=0, report_to=["wandb"])
    trainer.train()
    trainer.reporting.logger.close()
    assert len(wandb_calls["init"]) == 1 and TRAIN_KEYS_143 <= _logged_keys(wandb_calls)


def test_a_missing_wandb_under_auto_names_wandb_config_and_the_way_out(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if wandb were not installed
    with pytest.raises(ImportError, match=r"a wandb_config \(report_to='auto'.*report_to='none'"):
        _magrpo(tmp_path, EvalHooks(), {"project": "p"}, eval_interval=0)
    # Without a wandb_config, auto needs no wandb.
    _magrpo(tmp_path, EvalHooks(), None, eval_interval=0)


# ------------------------------------------------------------------ eval_at_end="auto"
def test_eval_interval_zero_evaluates_never(tmp_path, wandb_calls):
    hooks = EvalHooks()
    trainer = _magrpo(tmp_path, hooks, {"project": "p"}, eval_interval=0)
    assert trainer.args.eval_at_end == "auto"
    trainer.train()
    trainer.reporting.logger.close()
    assert (hooks.logger_calls, hooks.aggregator_calls) == (0, 0)
    assert not any(k.startswith("eval/") for k in _logged_keys(wandb_calls))
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert records and not any(k.startswith("eval/") for r in records for k in r)


def test_a_run_that_evaluates_keeps_its_final_evaluation(tmp_path):
    hooks = EvalHooks()
    # One batch of two items: the cadence evaluates before it, the final evaluation after it.
    trainer = _magrpo(tmp_path, hooks, None, eval_interval=4, rollout_batch_size=2)
    trainer.train()
    assert hooks.logger_calls == 2
    hooks_off = EvalHooks()
    _magrpo(tmp_path / "off", hooks_off, None, eval_interval=4, eval_at_end=False).train()
    assert hooks_off.logger_calls == 1
    hooks_on = EvalHooks()
    _magrpo(tmp_path / "on", hooks_on, None, eval_interval=0, eval_at_end=True).train()
    assert hooks_on.logger_calls == 1


# ------------------------------------------------------------------ the CLI
def test_a_run_files_wandb_section_logs_to_wandb(tmp_path, monkeypatch, wandb_calls):
    from comlrl.core.cli import main

    monkeypatch.chdir(tmp_path)
    common = [
        *TINY_CLI_RUN,
        "magrpo.eval_interval=1",
        "dataset.eval_limit=1",
        "checkpoint.enabled=false",
    ]
    assert main(["train", "--override", *common, "wandb.project=p", "output.run_name=w"]) == 0
    assert [init["project"] for init in wandb_calls["init"]] == ["p"]
    assert TRAIN_KEYS_143 | {"eval/turn_1/reward_mean"} <= _logged_keys(wandb_calls)
    off = [*common, "wandb.project=p", "magrpo.report_to=none", "output.run_name=off"]
    assert main(["train", "--override", *off]) == 0
    assert len(wandb_calls["init"]) == 1  # report_to: none kept the second run off W&B
