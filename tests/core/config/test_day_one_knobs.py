"""The knobs a TRL user reaches for on day one, one table: each reaches what it controls from
Python, a run file and ``comlrl train --set``, and a bad value is one CLI line naming the field
and what is valid. The behaviour behind each is tested where it lives (the cadences in
test_step_cadence.py, the epoch order in test_epoch_order.py)."""

from __future__ import annotations

import warnings

import pytest
import yaml

from comlrl.core import cli
from comlrl.core.cli import main
from comlrl.core.commands.launch import algorithm_config
from comlrl.core.loop.epoch_order import epoch_items
from comlrl.core.rollout.generation import SamplingParams, truncate_prompt_ids
from comlrl.reinforce import MAGRPOConfig
from tests.reinforce.helpers import make_trainer


def _sampling(args) -> SamplingParams:
    return SamplingParams.from_config(args)


def _sampler_gets(key, value):
    return lambda c: _sampling(c).generate_kwargs().get(key) == value


def _dataset_order_kept(c) -> bool:
    items = list(range(16))
    return epoch_items(items, c, 1) == items


# field, a valid value, whether a config built with it does what the value asks (the default
# must not), a bad value and the words of its valid range
KNOBS = [
    ("min_p", 0.1, _sampler_gets("min_p", 0.1), 1.5, "<= 1.0"),
    ("repetition_penalty", 1.3, _sampler_gets("repetition_penalty", 1.3), -1.0, "> 0.0"),
    ("max_prompt_length", 3, lambda c: _sampling(c).max_prompt_length == 3, 0, ">= 1"),
    ("shuffle_dataset", False, _dataset_order_kept, "sometimes", "true or false"),
    ("logging_steps", 3, lambda c: c.logging_steps == 3, 0, ">= 1"),
    ("steps_unit", "env", lambda c: c.steps_unit == "env", "epoch", "'optimizer', 'env'"),
    ("eval_steps", 4, lambda c: c.eval_steps == 4, 0, ">= 1"),
    ("save_steps", 4, lambda c: c.save_steps == 4, -2, ">= 1"),
    ("loss_aggregation", "dapo", lambda c: c.loss_aggregation == "token_mean", "cispo", "dr_grpo"),
]


@pytest.mark.parametrize("field, value, reached, bad, valid", KNOBS, ids=[k[0] for k in KNOBS])
def test_python_run_file_and_set_reach_what_the_knob_controls(
    tmp_path, monkeypatch, field, value, reached, bad, valid
):
    assert reached(MAGRPOConfig(**{field: value}))
    assert not reached(MAGRPOConfig())  # the default does something else

    run = {"algorithm": "magrpo", "magrpo": {field: value}}
    assert reached(algorithm_config(run, MAGRPOConfig, "magrpo"))

    seen = {}

    def capture(run, resume=None):
        seen["args"] = algorithm_config(run, MAGRPOConfig, "magrpo")
        return str(tmp_path / "run")

    monkeypatch.setattr(cli, "run_training", capture)
    run_file = tmp_path / "run.yaml"
    run_file.write_text(yaml.safe_dump(run))
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config", str(run_file)]) == 0
    assert reached(seen.pop("args"))
    assert main(["train", "--set", f"magrpo.{field}={value}"]) == 0
    assert reached(seen.pop("args"))


@pytest.mark.parametrize("field, value, reached, bad, valid", KNOBS, ids=[k[0] for k in KNOBS])
def test_a_bad_value_is_one_line_naming_the_field(
    tmp_path, monkeypatch, capsys, field, value, reached, bad, valid
):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--set", f"magrpo.{field}={bad}"]) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("comlrl")]
    assert len(lines) == 1, lines
    assert field in lines[0] and valid in lines[0], lines[0]


def test_long_prompts_lose_their_first_tokens_with_one_counting_warning():
    with pytest.warns(UserWarning, match=r"2 of 3 prompts .*max_prompt_length=3.*longest: 5"):
        cut = truncate_prompt_ids([[1, 2, 3, 4, 5], [6, 7], [8, 9, 10, 11]], 3)
    assert cut == [[3, 4, 5], [6, 7], [9, 10, 11]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert truncate_prompt_ids([[1, 2]], 3) == [[1, 2]]


def test_a_run_samples_from_truncated_prompts_with_the_penalties(tmp_path):
    trainer = make_trainer(
        tmp_path, max_prompt_length=3, min_p=0.05, repetition_penalty=1.2, num_train_epochs=1
    )
    backend = trainer.rollout_backend
    seen = []
    generate_ids = backend.generate_ids

    def recording(agent, prompt_ids, n, params, seeds=None):
        seen.append(([len(x) for x in prompt_ids], params.generate_kwargs()))
        return generate_ids(agent, prompt_ids, n, params, seeds)

    backend.generate_ids = recording
    with pytest.warns(UserWarning, match="max_prompt_length=3"):
        trainer.train()
    assert seen and all(max(lengths) <= 3 for lengths, _ in seen)
    assert all(k["min_p"] == 0.05 and k["repetition_penalty"] == 1.2 for _, k in seen)


@pytest.mark.parametrize("algo", ["madpo_iter", "marlhf_iter"])
def test_algo_switch_leaves_an_iterative_trainers_epochs_per_iteration(tmp_path, monkeypatch, algo):
    from comlrl.core.plugins import load_algorithm

    config_cls = load_algorithm(algo).default_config_cls
    seen = {}

    def capture(run, resume=None):
        seen["args"] = algorithm_config(run, config_cls, algo)
        return str(tmp_path / "run")

    monkeypatch.setattr(cli, "run_training", capture)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--algo", algo]) == 0
    # The demo's 6 epochs are a whole run; here they would go into every one of 6 iterations.
    assert seen["args"].num_train_epochs == config_cls().num_train_epochs
    assert seen["args"].num_iterations == 6 and seen["args"].temperature == 1.0
    run_file = tmp_path / "mine.yaml"
    run_file.write_text(yaml.safe_dump({"magrpo": {"num_train_epochs": 3}}))
    assert main(["train", "--config", str(run_file), "--algo", algo]) == 0
    assert seen["args"].num_train_epochs == 3  # what the user wrote is kept
